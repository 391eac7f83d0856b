// Package pgsched is a persistent, distributed "run this at time T" task
// scheduler whose only dependency is PostgreSQL.
//
// A task is identified by its key (OrderingID, ScheduledAt, UniquenessKey).
// Enqueueing a new key stores it; enqueueing a pending key overwrites its kind
// and payload; a key that already completed never runs again. Tasks of one
// OrderingID run one at a time across the whole cluster, in scheduled order.
//
// Use a Client to enqueue (from Go, or from SQL with pgsched.schedule) and a
// Worker to run tasks with your own handlers. Every state lives in ordinary
// tables in the schema chosen at migrate time (default "pgsched"), so psql
// shows everything.
package pgsched
