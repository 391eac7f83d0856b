package main

// The worker's container image (tools/cmd/image) has no
// /usr/share/zoneinfo: it holds the static binary and little else.
// Embedding the time zone database (about 450 kB) keeps TZ=Europe/Berlin and
// time.LoadLocation working there as they do on a host; without it both
// fall back to UTC or fail.
import _ "time/tzdata"
