package cronspec

import (
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zones work in containers without zoneinfo files
)

// maxCachedZones bounds the zone cache; there are about 600 IANA names.
const maxCachedZones = 1024

var zoneCache struct {
	sync.Mutex
	m map[string]*time.Location
}

// LoadZone returns the time zone with the IANA name name, such as
// "Europe/Berlin"; "" and "UTC" are UTC. It rejects "Local", whose meaning
// depends on the machine, and every name time.LoadLocation rejects, with
// an error that wraps ErrInvalid. Zones come from the system's zoneinfo
// or, where it is missing, from the copy embedded in the binary.
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
	if !zoneNameOK(name) {
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

// zoneNameOK accepts the shape of IANA names ("America/Argentina/Salta",
// "Etc/GMT+5"): file system spellings of the same zone such as
// "Europe//Berlin" or "Europe/./Berlin" would load but are not names.
func zoneNameOK(name string) bool {
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
		for _, r := range part {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
				r == '_' || r == '-' || r == '+' || r == '.'
			if !ok {
				return false
			}
		}
	}
	return true
}
