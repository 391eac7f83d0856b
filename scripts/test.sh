#!/usr/bin/env bash
# Runs every test against real PostgreSQL: TEST_DATABASE_URL when set, else a
# Docker container when an engine answers, else a throwaway local cluster
# (PostgreSQL, and Chromium for the console's browser tests, are installed
# from Debian's packages first if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-postgres.sh
./scripts/ensure-chromium.sh
status=0
go test -race -count=1 -timeout 15m "$@" ./... || status=$?
# The tools (tools/: cmd/bench, cmd/chaos, cmd/image), OpenTelemetry
# tracing (pgschedotel) and the Kubernetes manifests' offline validation
# are modules of their own, so what only they need stays out of go.mod;
# they run even when the tests above failed, and any failing fails the
# script.
(cd tools && go test -race -count=1 -timeout 15m ./...) || status=$?
(cd pgschedotel && go test -race -count=1 -timeout 15m ./...) || status=$?
(cd deploy/validate && go test -count=1 ./...) || status=$?
exit "$status"
