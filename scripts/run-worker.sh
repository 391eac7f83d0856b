#!/usr/bin/env bash
# Runs one pgsched worker. Without DATABASE_URL it starts (and keeps, in
# ~/.local/share/pgsched/postgres) a local PostgreSQL, migrates it and prints
# how to enqueue a first task with psql.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-postgres.sh
exec go run ./cmd/worker "$@"
