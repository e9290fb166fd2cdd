#!/usr/bin/env bash
# Instructions per RESP `INCR` of seqd's RESP door and of redis-server, both counted by
# valgrind's callgrind in one run, under the same redis-benchmark load (BENCHMARKS.md,
# "The RESP door", "Instructions per INCR"). Unlike requests per second, these counts
# do not depend on what else the machine is doing.
#
#   scripts/bench/resp_callgrind.sh        # after: cargo build --release --bin seqd
#
# Each server runs under callgrind on a 127.0.0.1 port of its own: seqd on a temporary
# SQLite file with the sequence `bench` (start 1, step 1000, --max-step 100000000 as
# scripts/bench-resp.sh runs it), a private redis-server (--save '' --appendonly no,
# the key `bench` set to 0). Each gets a warm-up (redis-benchmark -c 50 -n 20000), then
# its counters are zeroed, redis-benchmark -c 50 -n RCG_N (default 200000) INCR bench
# runs, and the counters are dumped. User-space work only: the kernel's share (TCP,
# epoll) is not counted. Prints per request: instructions, calls to malloc (seqd;
# redis-server uses jemalloc's own entry points, not counted) and clock reads.
# RCG_KEEP=1 keeps the callgrind files (for callgrind_annotate) and prints where.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
N=${RCG_N:-200000}
SEQD="${CARGO_TARGET_DIR:-$ROOT/target}/release/seqd"
for tool in valgrind callgrind_control redis-benchmark redis-cli redis-server; do
    command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install -y valgrind redis-server redis-tools)" >&2; exit 1; }
done
[[ -x $SEQD ]] || { echo "build first: cargo build --release --bin seqd" >&2; exit 1; }

# shellcheck source=scripts/bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
callgrind_tmp seqd-rcg "${RCG_KEEP:-0}"

# A free 127.0.0.1 port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# run NAME PORT: the load against the server under callgrind (pid VPID) on PORT.
run() {
    local name=$1 port=$2 i
    for i in $(seq 1 600); do
        [[ $(redis-cli -p "$port" PING 2>/dev/null) == PONG ]] && break
        sleep 0.1
    done
    redis-benchmark -p "$port" -c 50 -n 20000 INCR bench >/dev/null 2>&1
    callgrind_control --zero "$VPID" >/dev/null 2>&1
    local before after
    before=$(redis-cli -p "$port" INCR bench)
    redis-benchmark -p "$port" -c 50 -n "$N" INCR bench >/dev/null 2>&1
    after=$(redis-cli -p "$port" INCR bench)
    callgrind_control --dump=measured "$VPID" >/dev/null 2>&1
    kill "$VPID"; wait "$VPID" 2>/dev/null || true; VPID=""
    # Every INCR answered an integer: the counter moved by at least N (+1 for `after`).
    (( after - before >= N + 1 )) || { echo "$name: INCR moved $before -> $after, under $N requests" >&2; exit 1; }
    python3 "$ROOT/scripts/bench/cg_counts.py" "$name" "$((N + 2))" "$(ls -t "$TMP/$name.cg".* | head -n1)"
}

printf '%-12s %10s %14s %12s %12s\n' server requests 'instr/request' 'mallocs/req' 'clock/req'

port=$(free_port)
valgrind --tool=callgrind --callgrind-out-file="$TMP/redis-server.cg" redis-server --port "$port" --bind 127.0.0.1 \
    --save '' --appendonly no >"$TMP/redis.log" 2>&1 &
VPID=$!
for _ in $(seq 1 600); do [[ $(redis-cli -p "$port" PING 2>/dev/null) == PONG ]] && break; sleep 0.1; done
redis-cli -p "$port" SET bench 0 >/dev/null
run redis-server "$port"

port=$(free_port)
http=$(free_port)
"$SEQD" migrate --database-url "sqlite://$TMP/rcg.db?mode=rwc" >/dev/null 2>&1
valgrind --tool=callgrind --callgrind-out-file="$TMP/seqd.cg" "$SEQD" serve --database-url "sqlite://$TMP/rcg.db?mode=rwc" \
    --listen "127.0.0.1:$http" --resp-listen "127.0.0.1:$port" --max-step 100000000 >"$TMP/seqd.log" 2>&1 &
VPID=$!
for _ in $(seq 1 600); do curl -sf -o /dev/null "http://127.0.0.1:$http/healthz" && break; sleep 0.1; done
curl -sf --max-time 30 -o /dev/null -X POST "http://127.0.0.1:$http/v1/sequences" \
    -H 'content-type: application/json' -d '{"name":"bench","start":1,"step":1000}'
run seqd "$port"
