// Package pgtest gives every test package in pgsched a real PostgreSQL
// server. The server is chosen and, if necessary, started once per test
// binary, the first time a test asks for it:
//
//  1. TEST_DATABASE_URL, if set, is used as-is. Nothing is started or
//     stopped. The role must be allowed to create schemas and databases.
//  2. Otherwise, if a Docker engine answers within a few seconds (probed
//     through testcontainers-go, guarded against hangs and panics), a
//     postgres:15-alpine container is started with the testcontainers
//     postgres module. Set PGTEST_NO_DOCKER=1 to skip this probe.
//  3. Otherwise a private server is started from the machine's PostgreSQL
//     binaries with package localpg, in a fresh temporary directory, with
//     crash safety turned off for speed.
//
// If none of these works the test fails (it is never skipped) with a message
// that explains how to fix it: set TEST_DATABASE_URL, start Docker, or
// install PostgreSQL (`apt-get install postgresql`). Which source was used is
// logged once to stderr.
//
// Every test package that uses pgtest must stop what it started, so it needs
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// ServerURL fails the test if that is missing. Tests then call ServerURL for
// a connection string, AdminPool for a shared pool to create schemas or
// databases with, and UniqueName to name them without clashing with other
// tests or other test binaries sharing the same server.
package pgtest
