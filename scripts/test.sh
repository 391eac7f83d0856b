#!/usr/bin/env bash
# Runs every test against real PostgreSQL: TEST_DATABASE_URL when set, else a
# Docker container when an engine answers, else a throwaway local cluster
# (PostgreSQL is installed from Debian's packages first if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-postgres.sh
exec go test -race -count=1 -timeout 15m "$@" ./...
