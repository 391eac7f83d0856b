#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, pg_ctl, postgres) and psql
# are installed, from Debian's packages when they are missing. Tests and the
# local worker start their own throwaway server from these binaries.
set -euo pipefail

have_server() {
  command -v initdb >/dev/null 2>&1 && return 0
  command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ] && return 0
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

if have_server && command -v psql >/dev/null 2>&1; then
  exit 0
fi
if [ -n "${TEST_DATABASE_URL:-}" ] && command -v psql >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL is not installed; run as root, or: sudo apt-get install -y postgresql" >&2
  exit 1
fi
echo "installing PostgreSQL from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql postgresql-client >/dev/null
# Debian starts a cluster of its own on install; we only need the binaries.
if command -v pg_ctlcluster >/dev/null 2>&1; then
  for v in /etc/postgresql/*/main; do
    [ -d "$v" ] || continue
    ver=$(basename "$(dirname "$v")")
    pg_ctlcluster "$ver" main stop >/dev/null 2>&1 || true
  done
fi
