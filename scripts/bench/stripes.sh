#!/usr/bin/env bash
# Stripes benchmark (BENCHMARKS.md, "Stripes"): fetch latency and
# fetch-bound IDs/s with one database and with three stripes (two
# PostgreSQL databases and one MariaDB database, made fresh here and dropped
# on exit), then the HTTP rate of `GET /next` (wrk, 10 s, 64 connections)
# on one database and on the three stripes with the default settings.
#
#   scripts/bench/stripes.sh
#
# Environment: BENCH_PG [postgres://postgres@127.0.0.1:5432],
# BENCH_MYSQL [mysql://root@127.0.0.1:3306], STRIPES_PORT [18412].
# Everything stays on 127.0.0.1.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
MY=${BENCH_MYSQL:-mysql://root@127.0.0.1:3306}
PORT=${STRIPES_PORT:-18412}
if ! command -v wrk >/dev/null && [ "$(id -u)" = 0 ]; then apt-get install -y -qq wrk >/dev/null; fi
command -v psql >/dev/null && command -v mariadb >/dev/null && command -v wrk >/dev/null \
  || { echo "needs psql, mariadb and wrk" >&2; exit 1; }
PID=
DBS=(seqd_bench_s0 seqd_bench_s1)
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null
  wait 2>/dev/null || true
  for d in "${DBS[@]}"; do psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $d" >/dev/null 2>&1 || true; done
  mariadb -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS seqd_bench_s2" 2>/dev/null || true
}
fresh() {
  cleanup
  for d in "${DBS[@]}"; do psql -q "$PG/postgres" -c "CREATE DATABASE $d" >/dev/null; done
  mariadb -h 127.0.0.1 -u root -e "CREATE DATABASE seqd_bench_s2"
}
trap cleanup EXIT
URLS=("$PG/seqd_bench_s0" "$PG/seqd_bench_s1" "$MY/seqd_bench_s2")

cargo build --release --quiet --bin seqd --example stripes
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
fresh
"$ROOT/target/release/examples/stripes" "${URLS[@]}"

echo
echo "| setup | GET /next req/s (wrk -t2 -c64 -d10s) |"
echo "|---|---|"
for setup in one three; do
  fresh
  if [ $setup = one ]; then U="${URLS[0]}"; else U="${URLS[*]}"; fi
  RUST_LOG=error SEQD_DATABASE_URL="$U" "$ROOT/target/release/seqd" serve --listen "127.0.0.1:$PORT" 2>/dev/null &
  PID=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  curl -sf -X POST "http://127.0.0.1:$PORT/v1/sequences" -H 'content-type: application/json' \
    -d '{"name":"bench","step":1000}' >/dev/null
  curl -sf "http://127.0.0.1:$PORT/v1/sequences/bench/next" >/dev/null
  RATE=$(wrk -t2 -c64 -d10s "http://127.0.0.1:$PORT/v1/sequences/bench/next" | awk '/Requests\/sec/ {print $2}')
  echo "| $setup database$([ $setup = three ] && echo s) | $RATE |"
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
done
