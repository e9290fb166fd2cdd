#!/usr/bin/env bash
# Scale benchmark (BENCHMARKS.md, "A million sequences" and "First uses after
# a restart"): one seqd, just started, on a fresh database whose `sequences`
# table holds N rows added by SQL, every name touched once over HTTP; the rate
# of first uses, the slowest one and the server's RSS per block of 100,000
# names (10,000 for N = 10,000), then every name once more (the warm rate of
# the same run), a listing page and a /metrics scrape. Client:
# examples/scale.rs.
#
#   scripts/bench/scale.sh [N...]        default: 10000 100000 1000000
#
# Environment: SCALE_BACKEND [sqlite] sqlite, postgres (database seqd_scale
# on 127.0.0.1:5432, user postgres) or mysql (database seqd_scale on
# 127.0.0.1:3306, user root), each made afresh per N; SCALE_BIN (a seqd
# binary to measure instead of this tree's release build, e.g. an older build
# for a before/after table), SCALE_CONCURRENCY [32] requests in flight,
# SCALE_PORT [18411], SCALE_CLIENT [scale] `scale` (examples/scale.rs: every
# name once, per block of names) or `wrk` (wrk -t2, scripts/bench/first_uses.lua:
# first uses for SCALE_SECONDS [3] seconds, then warm for as long; a lighter
# client than the example's, so more of the two CPUs is left to the server).
# Everything listens on 127.0.0.1; the server is stopped on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(10000 100000 1000000)
CONCURRENCY=${SCALE_CONCURRENCY:-32}
CLIENT_KIND=${SCALE_CLIENT:-scale}
SECONDS_PER_PASS=${SCALE_SECONDS:-3}
PORT=${SCALE_PORT:-18411}
BACKEND=${SCALE_BACKEND:-sqlite}
case $BACKEND in
  sqlite) TOOL=sqlite3 ;;
  postgres) TOOL=psql ;;
  mysql) TOOL=mariadb ;;
  *) echo "SCALE_BACKEND is sqlite, postgres or mysql, not $BACKEND" >&2; exit 2 ;;
esac
command -v "$TOOL" >/dev/null || { echo "needs the $TOOL command" >&2; exit 1; }

cargo build --release --quiet --bin seqd --example scale
BIN=${SCALE_BIN:-$ROOT/target/release/seqd}
CLIENT=$ROOT/target/release/examples/scale
WORK=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); seqd: $BIN; backend: $BACKEND; $CONCURRENCY in flight"
for N in "${SIZES[@]}"; do
  # A fresh database of N rows named tenant-0000000.., made by SQL.
  case $BACKEND in
    sqlite)
      URL="sqlite://$WORK/scale-$N.db?mode=rwc"
      "$BIN" migrate --database-url "$URL" >/dev/null 2>&1
      sqlite3 "$WORK/scale-$N.db" "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < $N)
                 INSERT INTO sequences (name, max_id, step) SELECT printf('tenant-%07d', n), 0, 1000 FROM i;" ;;
    postgres)
      URL="postgres://postgres@127.0.0.1:5432/seqd_scale"
      psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS seqd_scale" -c "CREATE DATABASE seqd_scale"
      "$BIN" migrate --database-url "$URL" >/dev/null 2>&1
      psql -q -h 127.0.0.1 -U postgres -d seqd_scale -c "INSERT INTO sequences (name, max_id, step)
                 SELECT 'tenant-' || lpad(n::text, 7, '0'), 0, 1000 FROM generate_series(0, $N - 1) AS n" ;;
    mysql)
      URL="mysql://root@127.0.0.1:3306/seqd_scale"
      mariadb -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS seqd_scale; CREATE DATABASE seqd_scale"
      "$BIN" migrate --database-url "$URL" >/dev/null 2>&1
      mariadb -h 127.0.0.1 -u root seqd_scale -e "INSERT INTO sequences (name, max_id, step)
                 SELECT CONCAT('tenant-', LPAD(seq, 7, '0')), 0, 1000 FROM seq_0_to_$((N - 1))" ;;
  esac
  RUST_LOG=warn "$BIN" serve --database-url "$URL" --listen "127.0.0.1:$PORT" >"$WORK/seqd-$N.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  BLOCK=$(( N >= 100000 ? 100000 : N ))
  echo
  echo "## $N sequences ($BACKEND)"
  if [ "$CLIENT_KIND" = wrk ]; then
    # Each name once for SECONDS (the names must last: at most N requests),
    # then the names served, again and again: warm.
    NAMES=$N
    for pass in first warm; do
      LINE=$(SCALE_NAMES=$NAMES SCALE_THREADS=2 wrk -t2 -c"$CONCURRENCY" -d"${SECONDS_PER_PASS}s" --timeout 10s \
        -s scripts/bench/first_uses.lua "http://127.0.0.1:$PORT" | grep '^BENCH')
      REQS=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$LINE")
      [ "$pass" = warm ] || [ "$REQS" -le "$N" ] || echo "the $N names ran out: not all first uses; use fewer SCALE_SECONDS" >&2
      echo "$pass: $LINE"
      [ "$pass" = warm ] || echo "names live after it: $(curl -fs "http://127.0.0.1:$PORT/metrics" | sed -n 's/^seqd_names_in_memory{state="live"} //p')"
      NAMES=$(( REQS < N ? REQS : N ))
    done
  else
    "$CLIENT" "http://127.0.0.1:$PORT" "$PID" "$N" "$BLOCK" "$CONCURRENCY"
  fi
  kill "$PID"; wait "$PID" 2>/dev/null || true
  PID=
done
