#!/usr/bin/env bash
# Runs one pgsched worker. Without DATABASE_URL it starts (and keeps, in
# ~/.local/share/pgsched/postgres, or /var/lib/pgsched/postgres as root) a
# local PostgreSQL, migrates it and prints how to enqueue a first task with
# psql. The worker is built first and run
# as its own process, so Ctrl-C reaches it directly: it drains and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-postgres.sh
mkdir -p .pgsched/bin
go build -o .pgsched/bin/worker ./cmd/worker
exec .pgsched/bin/worker "$@"
