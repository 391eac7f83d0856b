package pgschedui

import (
	"net/http"
	"time"
)

// CSRF is the CSRF field h's forms carry.
func CSRF(h http.Handler) string { return h.(*console).csrf() }

// SetSignInClock makes h's sign-in throttle read the time from now, so a
// test steps over lock-outs instead of waiting them out. Call it before h
// serves.
func SetSignInClock(h http.Handler, now func() time.Time) { h.(*console).signins.now = now }
