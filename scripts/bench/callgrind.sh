#!/usr/bin/env bash
# Instructions, heap allocations and clock reads per request of seqd against the
# baseline (examples/baseline.rs), counted by valgrind's callgrind: unlike req/s,
# these counts do not depend on what else the machine is doing.
#
#   scripts/bench/callgrind.sh            # after scripts/bench-http.sh built the binaries
#
# Each server runs under callgrind on 127.0.0.1 (seqd on a temporary SQLite file with
# the sequence `bench`), gets a short warm-up, then its counters are zeroed and it
# serves GET /v1/sequences/bench/next (Accept: text/plain) from wrk (1 thread,
# 4 connections, CG_DURATION, default 8s) before they are dumped; the rows ending
# in -json ask for JSON (Accept: application/json) instead; seqd-token is seqd
# under --client-auth on with a client token on every request. User-space work only:
# the kernel's share (TCP, epoll) is not counted. Needs valgrind and wrk.
# CG_KEEP=1 keeps the callgrind files (for callgrind_annotate) and prints where.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DURATION=${CG_DURATION:-8s}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SEQD="$TARGET_DIR/release/seqd"
BASE="$TARGET_DIR/release/examples/baseline"
command -v valgrind >/dev/null || { echo "valgrind is missing (apt-get install -y valgrind)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "wrk is missing (apt-get install -y wrk)" >&2; exit 1; }
[[ -x $SEQD && -x $BASE ]] || { echo "build first: cargo build --release --bin seqd --example baseline" >&2; exit 1; }

# shellcheck source=scripts/bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
callgrind_tmp seqd-cg "${CG_KEEP:-0}"

# Extra wrk arguments of the next profile (the token's header), and its Accept.
AUTH=()
ACCEPT='text/plain'

# profile NAME ADDRESS-PATTERN CMD...: prints "NAME requests instructions mallocs clock_reads"
profile() {
    local name=$1 pattern=$2; shift 2
    valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.cg" "$@" >"$TMP/$name.log" 2>&1 &
    VPID=$!
    local addr="" i
    for i in $(seq 1 600); do
        addr=$(grep -o "$pattern" "$TMP/$name.log" | head -n1 | sed 's#.*[":/]\([0-9.]*:[0-9]*\)"*$#\1#' || true)
        [[ -n $addr ]] && break
        sleep 0.1
    done
    [[ -n $addr ]] || { cat "$TMP/$name.log" >&2; exit 1; }
    if [[ $name != baseline* ]]; then
        curl -sf --max-time 30 -o /dev/null -X POST "http://$addr/v1/sequences" \
            -H 'content-type: application/json' -d '{"name":"bench","step":1000}'
    fi
    wrk -t1 -c4 -d3s -H "Accept: $ACCEPT" "${AUTH[@]}" "http://$addr/v1/sequences/bench/next" >/dev/null
    callgrind_control --zero "$VPID" >/dev/null 2>&1
    local out
    out=$(wrk -t1 -c4 -d"$DURATION" -s "$ROOT/scripts/bench/report.lua" -H "Accept: $ACCEPT" "${AUTH[@]}" \
        "http://$addr/v1/sequences/bench/next" | sed -n 's/^BENCH //p')
    callgrind_control --dump=measured "$VPID" >/dev/null 2>&1
    kill "$VPID"; wait "$VPID" 2>/dev/null || true; VPID=""
    local req file
    req=$(printf '%s\n' "$out" | tr ' ' '\n' | sed -n 's/^requests=//p')
    file=$(ls -t "$TMP/$name.cg".* 2>/dev/null | head -n1)
    python3 "$ROOT/scripts/bench/cg_counts.py" "$name" "$req" "$file"
}

printf '%-12s %10s %14s %12s %12s\n' target requests 'instr/request' 'mallocs/req' 'clock/req'
profile baseline 'listening on http://[0-9.:]*' "$BASE" 127.0.0.1:0
profile seqd '"listen":"[0-9.:]*"' "$SEQD" --database-url "sqlite://$TMP/cg.db?mode=rwc" --listen 127.0.0.1:0 --log-format json
ACCEPT='application/json'
profile baseline-json 'listening on http://[0-9.:]*' "$BASE" 127.0.0.1:0
profile seqd-json '"listen":"[0-9.:]*"' "$SEQD" --database-url "sqlite://$TMP/cgj.db?mode=rwc" --listen 127.0.0.1:0 --log-format json
ACCEPT='text/plain'
# The same with --client-auth on and a client token on every request (the token made
# by the CLI on the database first; admin calls stay open on the loopback listener).
TOKEN=$("$SEQD" tokens create --label bench --prefix bench --database-url "sqlite://$TMP/cgt.db?mode=rwc" 2>/dev/null)
AUTH=(-H "Authorization: Bearer $TOKEN")
# What the header's bytes cost by themselves: sent, not looked at (--client-auth off).
profile seqd-header '"listen":"[0-9.:]*"' "$SEQD" --database-url "sqlite://$TMP/cgh.db?mode=rwc" --listen 127.0.0.1:0 --log-format json
profile seqd-token '"listen":"[0-9.:]*"' "$SEQD" --database-url "sqlite://$TMP/cgt.db?mode=rwc" --listen 127.0.0.1:0 --log-format json --client-auth on
