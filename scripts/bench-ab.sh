#!/usr/bin/env bash
# Interleaved A/B of pgsched's burn-downs: two commits' cmd/bench on ONE
# private durable PostgreSQL, alternating which goes first, pair by pair.
# Prints each pair's figures and the median new/old ratio per workload,
# and, where cmd/bench prints its "cpu:" split, the median CPU per task on
# each side: the bench process (the worker), the rest of the machine (the
# server), and the idle share. CPU per task moves less with the machine's
# load than throughput does, and says which side a difference is on.
# Only same-run ratios mean anything on these machines.
#
#   ./scripts/bench-ab.sh BASE [NEW]
#     BASE  a commit-ish of the project (e.g. the fixed baseline 800198c)
#     NEW   a commit-ish, or omitted: the working tree as it is now
#   PAIRS (5)   interleaved pairs
#   ONLY (burn-own,burn-ordered)   cmd/bench -only list (workloads that print
#               "burn-down, <name>: N tasks/s")
#   N (100000)  tasks per burn-down
#   AB_PGPORT (25490), AB_PGDATA (/tmp/bench-ab-pg): the private server
#
# Each commit's cmd/bench (in the root module or a tools module) must take
# -only, -runs, -n and DATABASE_URL and print "burn-down, NAME: N tasks/s".
# Run from the project's root. Needs root (the server runs as OS user
# postgres) and PostgreSQL 15's binaries (/usr/lib/postgresql/15/bin).
set -euo pipefail
BASE="${1:?usage: bench-ab.sh BASE [NEW]}"
NEW="${2:-}"
PAIRS="${PAIRS:-5}"
ONLY="${ONLY:-burn-own,burn-ordered}"
N="${N:-100000}"
PORT="${AB_PGPORT:-25490}"
DATA="${AB_PGDATA:-/tmp/bench-ab-pg}"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
root="$(git rev-parse --show-toplevel)"
work="$(mktemp -d /tmp/bench-ab.XXXXXX)"
as_pg() { if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi; }
cleanup() {
  as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$DATA"
  git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true
  [ -d "$work/new" ] && git -C "$root" worktree remove --force "$work/new" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

build() { # build DIR OUT: cmd/bench wherever it lives (the root module or a tools module)
  local dir="$1" out="$2" pkg mod
  pkg=$(cd "$dir" && git ls-files 'cmd/bench/main.go' '*/cmd/bench/main.go' | grep -v riverbench | head -1)
  [ -n "$pkg" ] || { echo "bench-ab: no cmd/bench/main.go in $dir" >&2; return 1; }
  pkg=$(dirname "$pkg"); mod=$pkg
  while [ "$mod" != "." ] && [ ! -f "$dir/$mod/go.mod" ]; do mod=$(dirname "$mod"); done
  if [ "$mod" = "." ]; then (cd "$dir" && go build -o "$out" "./$pkg")
  else (cd "$dir/$mod" && go build -o "$out" "./${pkg#"$mod"/}"); fi
}
git -C "$root" worktree add --detach "$work/base" "$BASE" >/dev/null 2>&1
build "$work/base" "$work/bench-old"
if [ -n "$NEW" ]; then
  git -C "$root" worktree add --detach "$work/new" "$NEW" >/dev/null 2>&1
  build "$work/new" "$work/bench-new"
else
  build "$root" "$work/bench-new"
fi

rm -rf "$DATA"; mkdir -p "$DATA"; chown postgres "$DATA"; chmod 700 "$DATA"
as_pg "$PGBIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
cat >>"$DATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DATA'
shared_buffers = 1GB
max_connections = 200
work_mem = 16MB
maintenance_work_mem = 256MB
wal_buffers = 16MB
max_wal_size = 4GB
fsync = on
synchronous_commit = on
CONF
as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$DATA/log" -w start >/dev/null
DSN="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"

results="$work/results"; : >"$results"
for i in $(seq 1 "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    DATABASE_URL="$DSN" "$work/bench-$v" -only "$ONLY" -runs 1 -n "$N" 2>&1 \
      | sed -nE -e 's/^burn-down, ([^:]+): ([0-9]+) tasks\/s; cpu: bench process ([0-9.]+) cores, rest ([0-9.]+), idle ([0-9.]+).*/\1\t\2\t\3\t\4\t\5/p;t' \
                -e 's/^burn-down, ([^:]+): ([0-9]+) tasks\/s.*/\1\t\2\t\t\t/p' \
      | while IFS=$'\t' read -r name rate worker rest idle; do
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$i" "$v" "$name" "$rate" "$worker" "$rest" "$idle" | tee -a "$results"
        done
  done
done

python3 - "$results" <<'PY'
import sys, statistics, collections
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
by = collections.defaultdict(dict)
cpu = collections.defaultdict(list)  # (name, side) -> [(worker us, rest us, idle cores)]
for pair, v, name, rate, worker, rest, idle in rows:
    by[(name, pair)][v] = float(rate)
    if worker:
        r = float(rate)
        cpu[(name, v)].append((float(worker) / r * 1e6, float(rest) / r * 1e6, float(idle)))
names = sorted({n for n, _ in by})
print()
for name in names:
    ratios = [d["new"] / d["old"] for (n, _), d in sorted(by.items()) if n == name and "new" in d and "old" in d]
    olds = [d["old"] for (n, _), d in by.items() if n == name and "old" in d]
    news = [d["new"] for (n, _), d in by.items() if n == name and "new" in d]
    if not ratios:
        continue
    print(f"{name}: new/old per pair {', '.join(f'{r:.3f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.3f} "
          f"(old median {statistics.median(olds):.0f}/s, new {statistics.median(news):.0f}/s)")
    sides = []
    for v in ("old", "new"):
        c = cpu.get((name, v))
        if c:
            sides.append(f"{v} worker {statistics.median(x[0] for x in c):.1f} us, "
                         f"rest {statistics.median(x[1] for x in c):.1f} us, "
                         f"idle {statistics.median(x[2] for x in c):.2f} cores")
    if sides:
        print(f"{name}: CPU per task, medians: {'; '.join(sides)}")
PY
