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
# The Kubernetes manifests' offline validation is a module of its own, so
# its k8s.io dependencies stay out of go.mod; it runs even when the tests
# above failed, and either failing fails the script.
(cd deploy/validate && go test -count=1 ./...) || status=$?
exit "$status"
