#!/usr/bin/env bash
# Global ordering benchmark (BENCHMARKS.md, "Global ordering"): IDs/s of a
# sequence with "ordering":"global" served by 1 and 3 seqd instances, against
# the naive allocator (one `UPDATE ... SET max_id = max_id + 1 ... RETURNING`
# per ID, driven by pgbench), on the same fresh PostgreSQL database, in the
# same run, at 16, 32, 48 and 64 concurrent clients.
#
#   scripts/bench/global.sh            [BENCH_DURATION=10s] [BENCH_CLIENTS="16 32 48 64"]
#
# seqd is driven by wrk (-t1 per instance; with 3 instances the clients are
# split over them and the rates summed); every response must be 200. The
# mean number of requests merged into one reservation is read from each
# instance's /metrics (seqd_global_merged_requests). Everything on 127.0.0.1.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
DUR=${BENCH_DURATION:-10s}
CLIENTS=${BENCH_CLIENTS:-16 32 48 64}
DB=seqd_bench_global
if ! command -v wrk >/dev/null && [ "$(id -u)" = 0 ]; then apt-get install -y -qq wrk >/dev/null; fi
command -v psql >/dev/null && command -v pgbench >/dev/null && command -v wrk >/dev/null \
  || { echo "needs psql, pgbench and wrk" >&2; exit 1; }
PIDS=()
stop_all() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; PIDS=(); }
cleanup() { stop_all; psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true; rm -f "$WORK"/*; rmdir "$WORK" 2>/dev/null || true; }
WORK=$(mktemp -d)
trap cleanup EXIT
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB" >/dev/null
psql -q "$PG/postgres" -c "CREATE DATABASE $DB" >/dev/null
psql -q "$PG/$DB" -c "CREATE TABLE naive (name TEXT PRIMARY KEY, max_id BIGINT NOT NULL); INSERT INTO naive VALUES ('g', 0);" >/dev/null
echo "UPDATE naive SET max_id = max_id + 1 WHERE name = 'g' RETURNING max_id;" > "$WORK/naive.sql"

cargo build --release --quiet --bin seqd
BIN=$ROOT/target/release/seqd
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); PostgreSQL $(psql -tA "$PG/postgres" -c 'SHOW server_version')"

start() { # n instances
  for i in $(seq 1 "$1"); do
    RUST_LOG=error "$BIN" serve --database-url "$PG/$DB" --listen "127.0.0.1:$((18420 + i))" 2>/dev/null &
    PIDS+=($!)
  done
  for i in $(seq 1 "$1"); do
    for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$((18420 + i))/healthz" >/dev/null && break; sleep 0.1; done
  done
}
merged() { # mean requests per reservation over instances 1..n
  local s=0 c=0
  for i in $(seq 1 "$1"); do
    read -r a b < <(curl -sf "http://127.0.0.1:$((18420 + i))/metrics" | awk '/^seqd_global_merged_requests_sum/ {s=$2} /^seqd_global_merged_requests_count/ {c=$2} END {print s+0, c+0}')
    s=$(echo "$s + $a" | bc); c=$(echo "$c + $b" | bc)
  done
  [ "$c" = 0 ] && echo "-" || echo "scale=1; $s / $c" | bc
}

start 1
curl -sf -X POST http://127.0.0.1:18421/v1/sequences -H 'content-type: application/json' \
  -d '{"name":"g","ordering":"global"}' >/dev/null
stop_all

echo
echo "| clients | naive (pgbench) IDs/s | seqd global, 1 instance | x naive | merged | seqd global, 3 instances | x naive | merged |"
echo "|---|---|---|---|---|---|---|---|"
for C in $CLIENTS; do
  NAIVE=$(pgbench -n -c "$C" -j 2 -T "${DUR%s}" -f "$WORK/naive.sql" "$PG/$DB" 2>/dev/null | awk '/^tps/ {print $3; exit}')
  row="| $C | ${NAIVE%.*}"
  for N in 1 3; do
    start "$N"
    # warm-up, then the measured run; clients split over the instances
    for i in $(seq 1 "$N"); do curl -sf "http://127.0.0.1:$((18420 + i))/v1/sequences/g/next" >/dev/null; done
    TOTAL=0; ERR=0; WRKS=()
    for i in $(seq 1 "$N"); do
      share=$(( C / N + (i <= C % N ? 1 : 0) ))
      wrk -t1 -c"$share" -d"$DUR" "http://127.0.0.1:$((18420 + i))/v1/sequences/g/next" > "$WORK/wrk-$i.txt" &
      WRKS+=($!)
    done
    wait "${WRKS[@]}"
    for i in $(seq 1 "$N"); do
      r=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk-$i.txt")
      e=$(awk '/Non-2xx/ {print $NF}' "$WORK/wrk-$i.txt"); ERR=$((ERR + ${e:-0}))
      TOTAL=$(echo "$TOTAL + $r" | bc)
    done
    [ "$ERR" = 0 ] || echo "warning: $ERR non-2xx answers with $N instance(s) at $C clients" >&2
    row="$row | ${TOTAL%.*} | $(echo "scale=1; $TOTAL / $NAIVE" | bc) | $(merged "$N")"
    stop_all
  done
  echo "$row |"
done
