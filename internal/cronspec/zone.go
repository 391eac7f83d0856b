package cronspec

import (
	"slices"
	"sync"
	"time"
	_ "time/tzdata" // zones work in containers without zoneinfo files
)

//go:generate go run mkzones.go

// maxCachedZones bounds the zone cache; there are about 600 IANA names.
const maxCachedZones = 1024

var zoneCache struct {
	sync.Mutex
	m map[string]*time.Location
}

// LoadZone returns the time zone with the IANA name name, such as
// "Europe/Berlin"; "" and "UTC" are UTC. It accepts only the names of the
// time zone database embedded in the binary (zoneNames, spelled exactly),
// so a name that loads here loads on every node, containers without
// zoneinfo files included: not "Local", whose meaning depends on the
// machine, nor the system's extra files ("posix/Europe/Berlin",
// "right/UTC", "localtime"), nor file system spellings ("Europe//Berlin",
// "europe/berlin" on a case-insensitive disk). Errors wrap ErrInvalid.
// The data comes from the system's zoneinfo or, where it is missing, from
// the embedded copy.
func LoadZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errorf(`time zone "Local" is not allowed: name an IANA zone like "Europe/Berlin", or "" for UTC`)
	}
	zoneCache.Lock()
	loc := zoneCache.m[name]
	zoneCache.Unlock()
	if loc != nil {
		return loc, nil
	}
	if _, found := slices.BinarySearch(zoneNames[:], name); !found {
		return nil, errorf(`unknown time zone %q: want an IANA name like "Europe/Berlin"`, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errorf(`unknown time zone %q: want an IANA name like "Europe/Berlin"`, name)
	}
	zoneCache.Lock()
	defer zoneCache.Unlock()
	if zoneCache.m == nil {
		zoneCache.m = make(map[string]*time.Location)
	}
	if len(zoneCache.m) < maxCachedZones {
		zoneCache.m[name] = loc
	}
	return loc, nil
}
