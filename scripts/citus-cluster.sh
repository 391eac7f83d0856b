#!/usr/bin/env bash
# A one-machine Citus cluster for tests and benchmarks: a coordinator and
# two workers, three PostgreSQL servers from the machine's binaries with
# Citus preloaded, each on its own port and data directory. pg_stat_statements
# is loaded too: citus_stat_statements needs it, and TestCitusHotPathIsRouted
# reads it.
#
#   scripts/citus-cluster.sh start   # builds/installs Citus if missing (../shared/citus), starts, prints the URL
#   scripts/citus-cluster.sh url     # the coordinator's connection string
#   scripts/citus-cluster.sh stop    # stops the servers and removes their data
#
# CITUS_DIR (default /tmp/pgsched-citus) holds the data; CITUS_PORT (default
# 29480) is the coordinator's port, the workers take the next two. The
# default is below Linux's ephemeral range (32768-60999): a port in it can
# be taken at any moment by some client connection's local end, and a
# server then fails to start with "Address already in use". CITUS_DURABLE=1
# keeps fsync, synchronous_commit and full_page_writes on (the benchmark's
# cluster); tests run without them. CITUS_SHARED_BUFFERS (256MB) per
# server. These settings are written when a data directory is created: one
# left from an earlier start keeps its own (stop removes it). Not for
# production: trust authentication, one machine.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dir="${CITUS_DIR:-/tmp/pgsched-citus}"
port="${CITUS_PORT:-29480}"
ports=("$port" "$((port + 1))" "$((port + 2))")
names=(coordinator worker1 worker2)
pgbin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

psql_at() { # port, sql...
  local p="$1"; shift
  as_pg "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$p" -U postgres -d postgres "$@"
}

start() {
  "$here/scripts/ensure-postgres.sh" >&2
  [ -n "$pgbin" ] || { echo "citus-cluster: no PostgreSQL binaries under /usr/lib/postgresql" >&2; exit 1; }
  citus_install="${CITUS_INSTALL:-$here/../shared/citus/install.sh}"
  if [ ! -f "$("$pgbin/pg_config" --pkglibdir)/citus.so" ]; then
    [ -x "$citus_install" ] || { echo "citus-cluster: Citus is not installed and $citus_install is missing" >&2; exit 1; }
    "$citus_install" >&2
  fi
  durable=off
  [ "${CITUS_DURABLE:-0}" = 1 ] && durable=on
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$dir"; fi
  for i in 0 1 2; do
    d="$dir/${names[$i]}"
    if [ ! -f "$d/PG_VERSION" ]; then
      as_pg "$pgbin/initdb" -D "$d" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
      cat >>"$d/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = ${ports[$i]}
unix_socket_directories = '$d'
shared_preload_libraries = 'citus,pg_stat_statements'
pg_stat_statements.max = 20000
max_connections = 300
shared_buffers = ${CITUS_SHARED_BUFFERS:-256MB}
fsync = $durable
synchronous_commit = $durable
full_page_writes = $durable
max_prepared_transactions = 200
citus.max_client_connections = 250
logging_collector = off
CONF
    fi
    if ! as_pg "$pgbin/pg_ctl" -D "$d" status >/dev/null 2>&1; then
      as_pg "$pgbin/pg_ctl" -D "$d" -l "$d/server.log" -w -t 60 start >/dev/null
    fi
    # Only when missing: on a worker already in the cluster Citus refuses
    # even CREATE EXTENSION IF NOT EXISTS.
    if [ "$(psql_at "${ports[$i]}" -tAc "SELECT count(*) FROM pg_extension WHERE extname IN ('citus', 'pg_stat_statements')")" != 2 ]; then
      psql_at "${ports[$i]}" -c "CREATE EXTENSION IF NOT EXISTS citus" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
    fi
    if [ "$i" -gt 0 ]; then
      # pgsched runs only delegated calls on the workers, each statement of
      # which names one partition: a statement planned over several shards
      # there is a bug, and this cluster refuses it.
      psql_at "${ports[$i]}" -c "ALTER SYSTEM SET citus.multi_task_query_log_level = 'error'" -c "SELECT pg_reload_conf()" >/dev/null
    fi
  done
  psql_at "$port" -c "SELECT citus_set_coordinator_host('127.0.0.1', $port)" >/dev/null
  for i in 1 2; do
    psql_at "$port" -c "SELECT citus_add_node('127.0.0.1', ${ports[$i]}) WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE nodeport = ${ports[$i]})" >/dev/null
  done
  echo "$url"
}

stop() {
  for i in 2 1 0; do
    d="$dir/${names[$i]}"
    [ -f "$d/PG_VERSION" ] && as_pg "$pgbin/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1 || true
  done
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  url) echo "$url" ;;
  *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
