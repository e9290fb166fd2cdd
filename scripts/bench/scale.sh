#!/usr/bin/env bash
# Scale benchmark (BENCHMARKS.md, "A million sequences"): one seqd on a fresh
# SQLite file whose `sequences` table holds N rows added by SQL, every name
# touched once over HTTP; the rate of first uses and the server's RSS per
# block of 100,000 names (10,000 for N = 10,000), then a listing page and a
# /metrics scrape. Client: examples/scale.rs.
#
#   scripts/bench/scale.sh [N...]        default: 10000 100000 1000000
#
# Environment: SCALE_BIN (a seqd binary to measure instead of this tree's
# release build, e.g. an older build for a before/after table),
# SCALE_CONCURRENCY [32] requests in flight, SCALE_PORT [18411].
# Everything listens on 127.0.0.1; the server is stopped on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(10000 100000 1000000)
CONCURRENCY=${SCALE_CONCURRENCY:-32}
PORT=${SCALE_PORT:-18411}
command -v sqlite3 >/dev/null || { echo "needs the sqlite3 command (apt-get install sqlite3)" >&2; exit 1; }

cargo build --release --quiet --bin seqd --example scale
BIN=${SCALE_BIN:-$ROOT/target/release/seqd}
CLIENT=$ROOT/target/release/examples/scale
WORK=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); seqd: $BIN"
for N in "${SIZES[@]}"; do
  DB="$WORK/scale-$N.db"
  URL="sqlite://$DB?mode=rwc"
  "$BIN" migrate --database-url "$URL" >/dev/null 2>&1
  sqlite3 "$DB" "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < $N)
                 INSERT INTO sequences (name, max_id, step) SELECT printf('tenant-%07d', n), 0, 1000 FROM i;"
  RUST_LOG=warn "$BIN" serve --database-url "$URL" --listen "127.0.0.1:$PORT" >"$WORK/seqd-$N.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  BLOCK=$(( N >= 100000 ? 100000 : N ))
  echo
  echo "## $N sequences"
  "$CLIENT" "http://127.0.0.1:$PORT" "$PID" "$N" "$BLOCK" "$CONCURRENCY"
  kill "$PID"; wait "$PID" 2>/dev/null || true
  PID=
done
