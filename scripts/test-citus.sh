#!/usr/bin/env bash
# Runs every test against a one-machine Citus cluster (coordinator and two
# workers, scripts/citus-cluster.sh) that it starts and stops again: each
# test's schema is distributed as migrate -citus does (PGSCHED_TEST_CITUS=1),
# and the TestCitus* tests, which need a cluster, run too. Citus is built
# from ../shared/citus the first time (about 6 minutes on 2 cores). With
# PGSCHED_CITUS_URL set, uses that cluster instead. Arguments go to go test
# (e.g. -run TestCitus for the Citus tests alone).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PGSCHED_CITUS_URL:-}" ]; then
  if [ -z "${CITUS_INSTALL:-}" ] && [ ! -x ../shared/citus/install.sh ] && [ -x /work/shared/citus/install.sh ]; then
    export CITUS_INSTALL=/work/shared/citus/install.sh
  fi
  trap './scripts/citus-cluster.sh stop' EXIT
  PGSCHED_CITUS_URL="$(./scripts/citus-cluster.sh start)"
  export PGSCHED_CITUS_URL
fi
./scripts/ensure-chromium.sh
echo "Citus: $PGSCHED_CITUS_URL" >&2
# One package at a time: three servers share the machine with the tests,
# and packages running side by side stall each other's statements for
# seconds.
TEST_DATABASE_URL="$PGSCHED_CITUS_URL" PGSCHED_TEST_CITUS=1 go test -p 1 -count=1 -timeout 30m "$@" ./...
