#!/usr/bin/env bash
# Puts pgsched beside its peers on one PostgreSQL, in one run, and prints one
# table (workload, median, min, max). Machines differ: only same-run ratios
# mean anything.
#
#   ./scripts/bench.sh [--anchors] [--quick]
#
# 1. makes sure PostgreSQL is installed (scripts/ensure-postgres.sh);
# 2. starts ONE private, durable (fsync on) server: port BENCH_PGPORT
#    (25450), data dir BENCH_PGDATA (/tmp/pgsched-bench-pg, wiped before and
#    after), as OS user postgres when run as root;
# 3. runs the headline burn-downs in rounds: each round runs pgsched's (a)
#    and (b) burn-downs, River's burn-downs (tools/peers/cmd/riverbench, from
#    its own Go module so River never enters pgsched's or the tools' go.mod)
#    and, with anchors, graphile-worker's batched burn-down once each,
#    minutes apart.
#    The ratios the targets are stated in are taken within each round and
#    given as their median: this machine's speed drifts by a third within
#    an hour, which skewed ratios of figures measured 20 minutes apart;
# 4. runs pgsched's and River's other workloads; with --anchors or
#    BENCH_ANCHORS=1 also graphile-worker 0.18.0 with 1,000 serial named
#    queues and pgbench claim100/insert100, the raw PostgreSQL ceiling;
# 5. prints the combined table and stops the server.
#
# With the system citus (on by default when Citus is installed or
# ../shared/citus can build it), each round also runs pgsched's headline
# burn-downs on a one-machine Citus cluster (scripts/citus-cluster.sh:
# coordinator and two workers, durable like the single server, port
# BENCH_CITUS_PORT (29490), data BENCH_CITUS_DIR (/tmp/pgsched-bench-citus))
# with every schema distributed (migrate -citus), printed beside the single
# server's figures with their ratio per round. Three servers on one
# machine measure Citus's overhead, not its scale-out: see docs/benchmarks.md.
#
# Sizes (environment; --quick sets small defaults for whatever is unset, for
# a smoke run of a few minutes):
#   BENCH_RUNS (3)               runs per figure
#   BENCH_N (100000)             burn-down and batch-enqueue size, all systems
#   BENCH_CONCURRENCY (100)      pgsched worker concurrency
#   BENCH_PREFETCH (400)         claimed tasks pgsched holds beyond that:
#                                100 + 400 = graphile-worker's local queue
#   BENCH_RATE (2000)            lateness run rate, tasks/s
#   BENCH_LATENESS_DURATION (10s)
#   BENCH_SUSTAINED_DURATION (60s)
#   BENCH_SUSTAINED_BACKLOG (75000)  tasks the sustained run keeps waiting,
#                                as River's duration mode; 0 = producers
#                                enqueue without pause
#   BENCH_SUSTAINED_RATE (0)     with BENCH_SUSTAINED_BACKLOG=0, enqueue cap
#                                in the sustained run; 0 = none
#   BENCH_BACKLOG (1000000)      backlog drain size
#   BENCH_CLAIM_PENDING (10000,1000000)  not-due sizes for claim latency
#   BENCH_CLAIM_DURATION (10s)
#   BENCH_ONLY                   cmd/bench -only list (e.g. burn-own,backlog)
#   BENCH_RIVER_WORKERS (100,500,2000)  River MaxWorkers values: as many
#                                handlers as pgsched runs, as many tasks as
#                                it holds (running + prefetched), River's
#                                own benchmark setting
#   BENCH_RIVER_ONLY             riverbench -only list (burn, enqueue,
#                                sustained: River's duration mode, beside
#                                pgsched's sustained run)
#   BENCH_REBALANCE_PHASE (10s)  length of each rebalance phase
#   BENCH_FLEX_DOWN              worker FlexDown in replicas and rebalance
#                                (the worker's default, 60s, unless set)
#   BENCH_GW_CONCURRENCY (24)    graphile-worker concurrency
#   BENCH_GW_TIMEOUT (900)       seconds before a graphile-worker run gives up
#   BENCH_PGBENCH_T (20)         seconds per pgbench run
#   BENCH_PGBENCH_CLIENTS (8)
#   BENCH_PGBENCH_ROWS (4000000) rows prefilled for claim100
#   BENCH_SYSTEMS (pgsched,river, citus when available; plus
#                 graphile-worker,pgbench with --anchors)  which systems to
#                 measure
#   BENCH_KEEP_PG=1              leave the server's data dir in place
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"

anchors="${BENCH_ANCHORS:-0}"
quick=0
for arg in "$@"; do
  case "$arg" in
    --anchors) anchors=1 ;;
    --quick) quick=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then
  : "${BENCH_RUNS:=1}" "${BENCH_N:=5000}" "${BENCH_LATENESS_DURATION:=3s}"
  : "${BENCH_SUSTAINED_DURATION:=5s}" "${BENCH_SUSTAINED_BACKLOG:=20000}" "${BENCH_BACKLOG:=20000}"
  : "${BENCH_CLAIM_PENDING:=1000,20000}" "${BENCH_CLAIM_DURATION:=3s}"
  : "${BENCH_PGBENCH_T:=2}" "${BENCH_PGBENCH_ROWS:=600000}"
  : "${BENCH_REBALANCE_PHASE:=2s}" "${BENCH_FLEX_DOWN:=3s}"
fi
citus_available() {
  local pgbin
  pgbin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  { [ -n "$pgbin" ] && [ -f "$("$pgbin/pg_config" --pkglibdir)/citus.so" ]; } ||
    [ -x "${CITUS_INSTALL:-$here/../shared/citus/install.sh}" ]
}
systems="${BENCH_SYSTEMS:-pgsched,river}"
if [ -z "${BENCH_SYSTEMS:-}" ]; then
  if citus_available; then
    systems="$systems,citus"
  else
    echo "bench.sh: no Citus here (not installed, no ../shared/citus): the Citus figures are left out" >&2
  fi
fi
[ "$anchors" = 1 ] && [ -z "${BENCH_SYSTEMS:-}" ] && systems="$systems,graphile-worker,pgbench"
want() { [[ ",$systems," == *",$1,"* ]]; }
RUNS="${BENCH_RUNS:-3}"
N="${BENCH_N:-100000}"
PGBENCH_T="${BENCH_PGBENCH_T:-20}"
PGBENCH_CLIENTS="${BENCH_PGBENCH_CLIENTS:-8}"
PGBENCH_ROWS="${BENCH_PGBENCH_ROWS:-4000000}"
GW_CONC="${BENCH_GW_CONCURRENCY:-24}"
PGPORT="${BENCH_PGPORT:-25450}"
PGDATA_DIR="${BENCH_PGDATA:-/tmp/pgsched-bench-pg}"

./scripts/ensure-postgres.sh

# ---- the private server (pg-up.sh semantics: fsync on, trust on loopback) ----
PGBIN="${PGBIN:-}"
if [ -z "$PGBIN" ]; then
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    PGBIN="$(pg_config --bindir)"
  else
    PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  fi
fi
[ -x "$PGBIN/initdb" ] || { echo "bench.sh: no initdb found (set PGBIN)" >&2; exit 1; }

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_stop() {
  if [ -f "$PGDATA_DIR/PG_VERSION" ]; then
    as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -m fast -w stop >/dev/null 2>&1 || true
  fi
}
tmp="$(mktemp -d /tmp/pgsched-bench.XXXXXX)"
CITUS_PORT_B="${BENCH_CITUS_PORT:-29490}"
CITUS_DIR_B="${BENCH_CITUS_DIR:-/tmp/pgsched-bench-citus}"
citus_cluster() { CITUS_PORT="$CITUS_PORT_B" CITUS_DIR="$CITUS_DIR_B" CITUS_DURABLE=1 CITUS_SHARED_BUFFERS=512MB "$here/scripts/citus-cluster.sh" "$@"; }
cleanup() {
  pg_stop
  if [ -d "$CITUS_DIR_B" ]; then citus_cluster stop >/dev/null 2>&1 || true; fi
  [ "${BENCH_KEEP_PG:-0}" = 1 ] || rm -rf "$PGDATA_DIR"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A server left running from an interrupted run is stopped and wiped: every
# run starts from an empty cluster.
pg_stop
rm -rf "$PGDATA_DIR"
mkdir -p "$PGDATA_DIR"
if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$PGDATA_DIR"; fi
chmod 700 "$PGDATA_DIR"
as_pg "$PGBIN/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
cat >>"$PGDATA_DIR/postgresql.conf" <<EOF

# ---- bench settings (scripts/bench.sh, as shared/anchors/pg-up.sh) ----
listen_addresses = '127.0.0.1'
port = ${PGPORT}
unix_socket_directories = '${PGDATA_DIR}'
max_connections = 200
shared_buffers = ${BENCH_PG_SHARED_BUFFERS:-1GB}
effective_cache_size = 12GB
work_mem = 16MB
maintenance_work_mem = 256MB
wal_buffers = 16MB
max_wal_size = 4GB
min_wal_size = 512MB
checkpoint_completion_target = 0.9
fsync = on
synchronous_commit = on
full_page_writes = on
logging_collector = off
log_min_messages = warning
EOF
cat >"$PGDATA_DIR/pg_hba.conf" <<EOF
local   all   all                 trust
host    all   all   127.0.0.1/32  trust
host    all   all   ::1/128       trust
EOF
as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -l "$PGDATA_DIR/server.log" -w -t 60 start >/dev/null
pgver="$("$PGBIN/postgres" --version | awk '{print $3}')"
dsn() { echo "postgres://postgres@127.0.0.1:${PGPORT}/$1?sslmode=disable"; }
psql_q() { PGOPTIONS='-c client_min_messages=warning' "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres "$@"; }
echo "bench.sh: PostgreSQL $pgver at $(dsn postgres) (durable, data $PGDATA_DIR)" >&2

rows="$tmp/rows"
: >"$rows"
section() { printf -- '-- %s --\n' "$1" >>"$rows"; }
# keep stdout rows of a program except its header line, and show them live
collect() { { grep -v '^workload ' || true; } | tee -a "$rows" >&2; }
# row LABEL VALUES...: median, min and max of the values
row() {
  local label="$1"; shift
  printf '%s\n' "$@" | sort -g | awk -v l="$label" '
    { v[NR] = $1 } END { if (NR == 0) exit; printf "%-44s %12.1f %12.1f %12.1f\n", l, v[int(NR / 2) + 1], v[1], v[NR] }' |
    tee -a "$rows" >&2
}

# ---- pgsched ----
echo "bench.sh: building" >&2
(cd tools && go build -o "$tmp/pgsched-bench" ./cmd/bench)
(cd tools/peers && go build -o "$tmp/riverbench" ./cmd/riverbench)
riverver="$(cd tools/peers && go list -m -f '{{.Version}}' github.com/riverqueue/river)"

args=(-runs "$RUNS" -n "$N")
[ -n "${BENCH_CONCURRENCY:-}" ] && args+=(-concurrency "$BENCH_CONCURRENCY")
[ -n "${BENCH_PREFETCH:-}" ] && args+=(-prefetch "$BENCH_PREFETCH")
[ -n "${BENCH_RATE:-}" ] && args+=(-rate "$BENCH_RATE")
[ -n "${BENCH_LATENESS_DURATION:-}" ] && args+=(-lateness-duration "$BENCH_LATENESS_DURATION")
[ -n "${BENCH_SUSTAINED_DURATION:-}" ] && args+=(-sustained-duration "$BENCH_SUSTAINED_DURATION")
[ -n "${BENCH_SUSTAINED_RATE:-}" ] && args+=(-sustained-rate "$BENCH_SUSTAINED_RATE")
[ -n "${BENCH_SUSTAINED_BACKLOG:-}" ] && args+=(-sustained-backlog "$BENCH_SUSTAINED_BACKLOG")
[ -n "${BENCH_BACKLOG:-}" ] && args+=(-backlog "$BENCH_BACKLOG")
[ -n "${BENCH_CLAIM_PENDING:-}" ] && args+=(-claim-pending "$BENCH_CLAIM_PENDING")
[ -n "${BENCH_CLAIM_DURATION:-}" ] && args+=(-claim-duration "$BENCH_CLAIM_DURATION")
[ -n "${BENCH_REBALANCE_PHASE:-}" ] && args+=(-rebalance-phase "$BENCH_REBALANCE_PHASE")
[ -n "${BENCH_FLEX_DOWN:-}" ] && args+=(-flex-down "$BENCH_FLEX_DOWN")

# The headline burn-downs run in rounds (see the top); the rest after.
pg_all="enqueue,burn-own,burn-ordered,burn-traced,limited,priority,lateness,sustained,backlog,claim-latency,replicas,rebalance"
pg_head=(); pg_rest=()
IFS=, read -ra _ws <<<"${BENCH_ONLY:-$pg_all}"
for w in "${_ws[@]}"; do
  case "$w" in
    burn-own|burn-ordered) pg_head+=("$w") ;;
    "") ;;
    *) pg_rest+=("$w") ;;
  esac
done
join() { local IFS=,; echo "$*"; }

if want citus; then
  if [ "${#pg_head[@]}" -eq 0 ]; then
    systems="$(sed 's/,citus,/,/; s/^,//; s/,$//' <<<",$systems,")"
  elif citus_url="$(citus_cluster stop >/dev/null 2>&1; citus_cluster start)"; then
    echo "bench.sh: Citus cluster (coordinator + 2 workers, durable) at $citus_url" >&2
  else
    echo "bench.sh: the Citus cluster did not start (see above): the Citus figures are left out" >&2
    systems="$(sed 's/,citus,/,/; s/^,//; s/,$//' <<<",$systems,")"
  fi
fi
river_burn=0; river_rest=1
river_only=",${BENCH_RIVER_ONLY:-burn,enqueue,sustained},"
case "$river_only" in *,burn,*) river_burn=1 ;; esac
river_rest_only="$(for w in enqueue sustained; do case "$river_only" in *,$w,*) printf '%s,' "$w" ;; esac; done)"
river_rest_only="${river_rest_only%,}"
[ -z "$river_rest_only" ] && river_rest=0

rargs=(-n "$N")
[ -n "${BENCH_RIVER_WORKERS:-}" ] && rargs+=(-workers "$BENCH_RIVER_WORKERS")
[ -n "${BENCH_SUSTAINED_DURATION:-}" ] && rargs+=(-sustained-duration "$BENCH_SUSTAINED_DURATION")
[ -n "${BENCH_SUSTAINED_BACKLOG:-}" ] && rargs+=(-sustained-backlog "$BENCH_SUSTAINED_BACKLOG")

if want graphile-worker; then
  gw="$here/tools/peers/anchors/graphile-worker"
  if [ ! -d "$gw/node_modules/graphile-worker" ]; then
    echo "bench.sh: installing graphile-worker and Node 22 (npm ci)" >&2
    (cd "$gw" && npm ci --no-audit --no-fund >/dev/null)
  fi
  psql_q -d postgres -c "CREATE DATABASE gw"
  gwver="$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$gw/node_modules/graphile-worker/package.json" | head -1)"
  # gw_run MODE-ARGS...: prints jobsPerSec of one burn-down of N jobs
  gw_run() {
    local out
    out="$(DATABASE_URL="$(dsn gw)" "$gw/node_modules/.bin/node" "$gw/bench.js" \
      --jobs "$N" --concurrency "$GW_CONC" --timeout-s "${BENCH_GW_TIMEOUT:-900}" "$@" | grep '^RESULT ')" ||
      { echo "bench.sh: graphile-worker run failed" >&2; return 1; }
    if ! grep -q '"outcome":"ok"' <<<"$out"; then
      # the rate over the window is still a rate; say it did not finish
      echo "bench.sh: graphile-worker did not finish $N jobs in ${BENCH_GW_TIMEOUT:-900}s: $out" >&2
    fi
    sed -n 's/.*"jobsPerSec":\([0-9.]*\).*/\1/p' <<<"$out"
  }
fi

failed=()
# round lines: ROUND<TAB>LABEL<TAB>VALUE, from tables of single runs (each
# row is also shown as it comes)
rounds="$tmp/rounds"
: >"$rounds"
to_rounds() {
  awk -v r="$1" 'NF > 3 && $1 != "workload" {
    print "round " r ": " $0 > "/dev/stderr"; v = $(NF-2); NF -= 3; printf "%s\t%s\t%s\n", r, $0, v }' >>"$rounds"
}
gw_label="gw burn-down $N, batched, jobs/s"
headline=0
{ want pgsched && [ "${#pg_head[@]}" -gt 0 ]; } && headline=1
{ want river && [ "$river_burn" = 1 ]; } && headline=1
{ want citus && [ "${#pg_head[@]}" -gt 0 ]; } && headline=1
want graphile-worker && headline=1
if [ "$headline" = 1 ]; then
  for r in $(seq "$RUNS"); do
    if want pgsched && [ "${#pg_head[@]}" -gt 0 ]; then
      echo "bench.sh: round $r/$RUNS: pgsched $(join "${pg_head[@]}")" >&2
      DATABASE_URL="$(dsn postgres)" "$tmp/pgsched-bench" "${args[@]}" -runs 1 -only "$(join "${pg_head[@]}")" |
        to_rounds "$r" || failed+=("pgsched round $r")
    fi
    if want citus && [ "${#pg_head[@]}" -gt 0 ]; then
      echo "bench.sh: round $r/$RUNS: pgsched on Citus $(join "${pg_head[@]}")" >&2
      DATABASE_URL="$citus_url" "$tmp/pgsched-bench" "${args[@]}" -runs 1 -citus -only "$(join "${pg_head[@]}")" |
        sed 's/^burn-down/citus burn-down/' | to_rounds "$r" || failed+=("citus round $r")
    fi
    if want river && [ "$river_burn" = 1 ]; then
      echo "bench.sh: round $r/$RUNS: River $riverver burn-down" >&2
      DATABASE_URL="$(dsn postgres)" "$tmp/riverbench" "${rargs[@]}" -runs 1 -only burn |
        to_rounds "$r" || failed+=("river round $r")
    fi
    if want graphile-worker; then
      echo "bench.sh: round $r/$RUNS: graphile-worker $gwver, batched" >&2
      if v="$(gw_run --local-queue 500 --complete-batch-delay 0)"; then
        printf '%s\t%s\t%s\n' "$r" "$gw_label" "$v" >>"$rounds"
      else
        failed+=("graphile-worker round $r")
      fi
    fi
  done
  section "headline burn-downs: $RUNS round(s), every system once per round"
  # each label's values over the rounds, in first-seen order
  while IFS= read -r label; do
    mapfile -t vals < <(awk -F'\t' -v l="$label" '$2 == l { print $3 }' "$rounds")
    row "$label" "${vals[@]}"
  done < <(awk -F'\t' '!seen[$2]++ { print $2 }' "$rounds")
  # ratio NAME NUM-REGEX DEN-REGEX: NUM/DEN in percent, per round
  ratio() {
    local vals
    mapfile -t vals < <(awk -F'\t' -v a="$2" -v b="$3" '
      $2 ~ a { n[$1] = $3 } $2 ~ b { d[$1] = $3 }
      END { for (r in n) if ((r in d) && d[r] > 0) print 100 * n[r] / d[r] }' "$rounds")
    [ "${#vals[@]}" -gt 0 ] && row "$1" "${vals[@]}"
    return 0
  }
  ratio "(a) own ids / gw batched, % per round" '^burn-down .*own ordering_id' '^gw burn-down .*batched'
  ratio "(a) own ids / River 100 workers, % p.r." '^burn-down .*own ordering_id' '^river burn-down .* 100 workers'
  ratio "(a) own ids / River 500 workers, % p.r." '^burn-down .*own ordering_id' '^river burn-down .* 500 workers'
  ratio "(a) own ids / River 2000 workers, % p.r." '^burn-down .*own ordering_id' '^river burn-down .* 2000 workers'
  ratio "(b) in order / (a) own ids, % per round" '^burn-down .*in order' '^burn-down .*own ordering_id'
  ratio "Citus / one server (a), % per round" '^citus burn-down .*own ordering_id' '^burn-down .*own ordering_id'
  ratio "Citus / one server (b), % per round" '^citus burn-down .*in order' '^burn-down .*in order'
fi

if want pgsched && [ "${#pg_rest[@]}" -gt 0 ]; then
  echo "bench.sh: pgsched (cmd/bench ${args[*]} -only $(join "${pg_rest[@]}"))" >&2
  section "pgsched (cmd/bench)"
  # A failing workload still lets the others (and the peers) report; the
  # script exits non-zero at the end.
  DATABASE_URL="$(dsn postgres)" "$tmp/pgsched-bench" "${args[@]}" -only "$(join "${pg_rest[@]}")" | collect ||
    failed+=(pgsched)
fi

if want river && [ "$river_rest" = 1 ]; then
  echo "bench.sh: River $riverver (tools/peers/cmd/riverbench ${rargs[*]} -runs $RUNS -only $river_rest_only)" >&2
  section "River $riverver (tools/peers/cmd/riverbench)"
  DATABASE_URL="$(dsn postgres)" "$tmp/riverbench" "${rargs[@]}" -runs "$RUNS" -only "$river_rest_only" | collect || failed+=(river)
fi

# ---- anchors ----
if want graphile-worker; then
  section "graphile-worker $gwver (tools/peers/anchors/graphile-worker)"
  echo "bench.sh: graphile-worker, 1000 serial queues" >&2
  vals=(); for _ in $(seq "$RUNS"); do v="$(gw_run --queues 1000)"; vals+=("$v"); done
  row "gw burn-down 1000 queues x $((N / 1000)), jobs/s" "${vals[@]}"
fi
if want pgbench; then
  pgb="$here/tools/peers/anchors/pgbench"
  psql_q -d postgres -c "CREATE DATABASE pgb"
  section "pgbench, PostgreSQL $pgver (tools/peers/anchors/pgbench)"
  # pgbench_run SCRIPT: tps of one run
  pgbench_run() {
    "$PGBIN/pgbench" -n -M prepared -c "$PGBENCH_CLIENTS" -j 2 -T "$PGBENCH_T" \
      -h 127.0.0.1 -p "$PGPORT" -U postgres -f "$pgb/$1" pgb 2>&1 |
      sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1 | grep . ||
      { echo "bench.sh: pgbench -f $1 failed" >&2; return 1; }
  }
  echo "bench.sh: pgbench claim100 ($PGBENCH_ROWS rows prefilled)" >&2
  vals=()
  for _ in $(seq "$RUNS"); do
    psql_q -d pgb -f "$pgb/schema.sql"
    psql_q -d pgb -c "INSERT INTO task (due, payload) SELECT now() - interval '1 hour', '{\"n\":1}' FROM generate_series(1, $PGBENCH_ROWS)"
    psql_q -d pgb -c "VACUUM ANALYZE task" -c "CHECKPOINT"
    pgbench_run claim100.sql >/dev/null
    left="$(psql_q -d pgb -Atc "SELECT count(*) FROM task")"
    if [ "$left" = 0 ]; then
      echo "bench.sh: claim100 ran out of rows; raise BENCH_PGBENCH_ROWS (figure is a lower bound)" >&2
    fi
    # rows actually claimed per second: tps would count empty claims too
    vals+=("$(awk -v r="$PGBENCH_ROWS" -v l="$left" -v t="$PGBENCH_T" 'BEGIN { print (r - l) / t }')")
  done
  row "pgbench claim100 x $PGBENCH_CLIENTS clients, tasks/s" "${vals[@]}"
  echo "bench.sh: pgbench insert100" >&2
  vals=()
  for _ in $(seq "$RUNS"); do
    psql_q -d pgb -f "$pgb/schema.sql"
    psql_q -d pgb -c "CHECKPOINT"
    tps="$(pgbench_run insert100.sql)"
    vals+=("$(awk -v t="$tps" 'BEGIN { print t * 100 }')")
  done
  row "pgbench insert100 x $PGBENCH_CLIENTS clients, tasks/s" "${vals[@]}"
fi

# ---- one table ----
echo
echo "pgsched beside its peers: one PostgreSQL $pgver server (fsync on), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "runs=$RUNS n=$N; medians of the runs, same-run ratios only"
printf '%-44s %12s %12s %12s\n' workload median min max
cat "$rows"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "bench.sh: failed: ${failed[*]} (see the errors above)" >&2
  exit 1
fi
