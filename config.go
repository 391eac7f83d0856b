package pgsched

// Config configures a Client and a Worker. A Client reads only Schema.
type Config struct {
	// Schema holds pgsched's tables; it must match the one migrated.
	// Defaults to "pgsched".
	Schema string
}
