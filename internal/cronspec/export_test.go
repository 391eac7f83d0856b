package cronspec

// ZoneNames are the names LoadZone accepts (besides "" and "UTC").
var ZoneNames = zoneNames[:]
