package pgschedui

import "net/http"

// CSRF is the CSRF field h's forms carry.
func CSRF(h http.Handler) string { return h.(*console).csrf() }
