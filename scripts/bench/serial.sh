#!/usr/bin/env bash
# Serial numbers benchmark (BENCHMARKS.md, "Serial numbers"): the HTTP rate
# and latency of `GET /next` on a plain sequence and on a daily serial
# sequence (`ORD{yyyy}{MM}{dd}{seq:08}`, Asia/Shanghai), on one release
# server over a fresh SQLite file, alternating three rounds each (wrk, 10 s,
# 2 threads, 64 connections). Everything stays on 127.0.0.1.
#
#   scripts/bench/serial.sh
#
# Environment: SERIAL_PORT [18413], ROUNDS [3].
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PORT=${SERIAL_PORT:-18413}
ROUNDS=${ROUNDS:-3}
if ! command -v wrk >/dev/null && [ "$(id -u)" = 0 ]; then apt-get install -y -qq wrk >/dev/null; fi
command -v wrk >/dev/null || { echo "needs wrk" >&2; exit 1; }
DIR=$(mktemp -d)
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

cargo build --release --quiet --bin seqd
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
RUST_LOG=error SEQD_DATABASE_URL="sqlite://$DIR/bench.db?mode=rwc" "$ROOT/target/release/seqd" serve --listen "127.0.0.1:$PORT" 2>/dev/null &
PID=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
post() {
  curl -sf -X POST "http://127.0.0.1:$PORT/v1/sequences" -H 'content-type: application/json' -d "$1" >/dev/null
}
post '{"name":"plain","step":1000}'
post '{"name":"ord","step":1000,"format":"ORD{yyyy}{MM}{dd}{seq:08}","reset":"day","time_zone":"Asia/Shanghai"}'
for name in plain ord; do
  curl -sf "http://127.0.0.1:$PORT/v1/sequences/$name/next" >/dev/null
  wrk -t2 -c64 -d3s "http://127.0.0.1:$PORT/v1/sequences/$name/next" >/dev/null  # warm-up
done
echo "sample answers: $(curl -sf "http://127.0.0.1:$PORT/v1/sequences/plain/next") $(curl -sf "http://127.0.0.1:$PORT/v1/sequences/ord/next")"
echo
echo "| round | sequence | req/s | p50 | p99 |"
echo "|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for name in plain ord; do
    OUT=$(wrk -t2 -c64 -d10s --latency "http://127.0.0.1:$PORT/v1/sequences/$name/next")
    RATE=$(echo "$OUT" | awk '/Requests\/sec/ {print $2}')
    P50=$(echo "$OUT" | awk '$1 == "50%" {print $2}')
    P99=$(echo "$OUT" | awk '$1 == "99%" {print $2}')
    echo "| $round | $name | $RATE | $P50 | $P99 |"
  done
done
