// Package localpg starts a private PostgreSQL server from the PostgreSQL
// binaries installed on the machine (initdb, pg_ctl, postgres).
//
// pgsched stores all of its state in PostgreSQL, so everything that exercises
// real behaviour - tests of leases, dispatch ordering, SKIP LOCKED queries, and
// the worker binary when it is run without a DATABASE_URL - needs a server.
// Docker is not always available (CI sandboxes, developer laptops without a
// daemon, locked-down machines), but the distribution's PostgreSQL package
// usually is. This package turns those binaries into a throw-away or
// persistent cluster with one call:
//
//	srv, err := localpg.Start(ctx, localpg.Options{DataDir: dir})
//	if err != nil { ... }
//	defer srv.Stop(ctx)
//	pool, err := pgxpool.New(ctx, srv.URL())
//
// Start runs initdb when DataDir is empty (trust authentication, user
// "postgres", UTF-8), writes a small managed block of settings into
// postgresql.conf (loopback-only listener, the chosen port, the Unix socket in
// the data directory, max_connections=400, shared_buffers=256MB and, unless
// Options.Durable is set, fsync/synchronous_commit/full_page_writes turned off
// for speed) and starts the server with pg_ctl. An existing cluster in DataDir
// is reused; a server already running on it is adopted but never stopped by
// this package.
//
// PostgreSQL refuses to run as root. When the calling process is root, the
// binaries are run as the OS user "postgres" and the data directory is
// chowned to it; every parent directory of DataDir must then be searchable by
// that user.
//
// The server listens only on 127.0.0.1 and trusts every local connection, so
// it is meant for tests and single-machine development, never for production.
package localpg
