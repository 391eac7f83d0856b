#!/usr/bin/env bash
# Runs the Citus tests (TestCitus*) against a one-machine Citus cluster that
# it starts (scripts/citus-cluster.sh; Citus is built from ../shared/citus
# the first time, about 6 minutes on 2 cores) and stops again. With
# PGSCHED_CITUS_URL set, uses that cluster instead.
#
#   scripts/test-citus.sh            the Citus tests (CI runs these)
#   scripts/test-citus.sh -suite     every test, each schema distributed
#                                    (PGSCHED_TEST_CITUS=1): what works on
#                                    Citus and what does not yet
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
echo "Citus: $PGSCHED_CITUS_URL" >&2
if [ "${1:-}" = -suite ]; then
  shift
  TEST_DATABASE_URL="$PGSCHED_CITUS_URL" PGSCHED_TEST_CITUS=1 go test -count=1 -timeout 30m "$@" ./...
else
  go test -race -count=1 -timeout 10m -run 'TestCitus' "$@" .
fi
