#!/usr/bin/env bash
# RESP load benchmark: seqd's RESP door (`seqd serve --resp-listen`) against a real
# redis-server, side by side, in one run (BENCHMARKS.md, "The RESP door").
#
#   scripts/bench-resp.sh [ROUNDS]        # ROUNDS defaults to 5; ~3-4 min on 2 CPUs
#
# 1. builds `seqd` in release mode;
# 2. uses the redis-server on 127.0.0.1:6379 when it answers PING (else starts its own
#    on a free 127.0.0.1 port with --save '' --appendonly no, stopped on exit), and
#    starts seqd on a temporary SQLite file with its HTTP and RESP listeners on
#    127.0.0.1 ports picked by the kernel;
# 3. draws from one fresh name, bench-<random hex>, on both: on redis `SET name 0`
#    (the key is deleted on exit), on seqd the sequence created through
#    POST /v1/sequences (start 1, step 1000); the benchmarked commands are
#    therefore the same bytes on both servers;
# 4. warms each up, then, for ROUNDS rounds, runs each workload on redis-server and
#    on seqd back to back (redis first in odd rounds, seqd first in even ones, so
#    that a change of the machine's load hits both):
#      incr     redis-benchmark -c 50 -n 500000 INCR name                (no pipelining)
#      pipe     redis-benchmark -c 50 -n 5000000 -P 16 INCR name
#      incrby   redis-benchmark -c 50 -n 500000 INCRBY name 1000
#    and on seqd alone, right after incrby:
#      http     wrk -t1 -c50 -d4s GET /v1/sequences/name/batch?count=1000 (JSON, 1000 IDs)
#      sbatch   redis-benchmark -c 50 -n 50000 SEQD.BATCH name 1000       (1000 integers)
# 5. checks every run: the name's counter (one INCR before and one after the run)
#    must have moved by at least requests x IDs per request, so a run whose answers
#    were errors (redis-benchmark counts error replies as requests) stops the script;
# 6. prints a Markdown report: medians, seqd / redis-server, the goals of the issue,
#    every round's numbers, latencies, CPU per request. It writes no file.
#
# Everything listens on 127.0.0.1. redis-benchmark (one thread) and wrk share the
# machine's CPUs with the server under test: "server CPU/req" (the server process's
# user + system time from /proc over the requests answered) does not depend on that
# split, and "client CPU" (the load generator's user + system time over the run's wall
# time: 1.00 = one whole CPU) shows how much of the machine the client took.
# When run as root, missing tools (redis-tools, wrk, and redis-server when none answers
# on the port) are installed with apt-get.
#
# Environment (defaults in brackets):
#   BENCH_CONNECTIONS [50]        connections of every run
#   BENCH_PIPELINE [16]           -P of the pipelined run
#   BENCH_N [500000]              requests of the incr run
#   BENCH_N_PIPELINED [5000000]   requests of the pipelined run
#   BENCH_N_INCRBY [500000]       requests of the incrby run
#   BENCH_BATCH [1000]            n of INCRBY / SEQD.BATCH, count of /batch
#   BENCH_N_SEQD_BATCH [50000]    requests of the SEQD.BATCH run (0 skips it)
#   BENCH_HTTP_DURATION [4]       seconds of each wrk run on /batch (0 skips it)
#   BENCH_WRK_THREADS [1]         wrk threads (1, like redis-benchmark's one thread)
#   BENCH_WARMUP [1]              0 skips the warm-up runs
#   BENCH_REDIS_PORT [6379]       the redis-server to use if it answers PING
#   BENCH_OWN_REDIS [0]           1: always start a private redis-server
#   BENCH_NO_BUILD [0]            1: use the binary already in target/release
#   BENCH_SEQD_ARGS [--max-step 100000000]
#                                 extra flags for seqd; the default raises the segment cap
#                                 as scripts/bench-http.sh does: INCRBY 1000 draws about
#                                 100 M IDs/s, which empties a 1,000,000-ID segment in 10 ms.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

log() { printf '[bench-resp %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=scripts/bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"

# The settings, each checked where it is read: the positive counts, then
# the counts that may be 0, then the rest.
ROUNDS=${1:-${BENCH_ROUNDS:-5}}
CONNECTIONS=${BENCH_CONNECTIONS:-50}
PIPELINE=${BENCH_PIPELINE:-16}
N_INCR=${BENCH_N:-500000}
N_PIPE=${BENCH_N_PIPELINED:-5000000}
N_INCRBY=${BENCH_N_INCRBY:-500000}
BATCH=${BENCH_BATCH:-1000}
WRK_THREADS=${BENCH_WRK_THREADS:-1}
for v in ROUNDS CONNECTIONS PIPELINE N_INCR N_PIPE N_INCRBY BATCH WRK_THREADS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
(( BATCH <= 10000 )) || die "BENCH_BATCH must be 1..=10000 (seqd's INCRBY and /batch cap)"
N_SBATCH=${BENCH_N_SEQD_BATCH:-50000}
HTTP_DURATION=${BENCH_HTTP_DURATION:-4}
[[ $N_SBATCH =~ ^[0-9]+$ && $HTTP_DURATION =~ ^[0-9]+$ ]] || die "BENCH_N_SEQD_BATCH and BENCH_HTTP_DURATION must be integers"
WARMUP=${BENCH_WARMUP:-1}
SHARED_REDIS_PORT=${BENCH_REDIS_PORT:-6379}
OWN_REDIS=${BENCH_OWN_REDIS:-0}
NO_BUILD=${BENCH_NO_BUILD:-0}
read -r -a SEQD_ARGS <<<"${BENCH_SEQD_ARGS---max-step 100000000}"
LUA_DIR="$ROOT/scripts/bench"
RUN_TIMEOUT=180 # seconds, any one run
START_SECONDS=$SECONDS

# ---------------------------------------------------------------- tools
APT_UPDATED=0
apt_install() { # apt_install PACKAGE WHY
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "$2: installing $1 (apt-get install -y $1)"
        if [[ $APT_UPDATED == 0 ]]; then apt-get update -qq >&2; APT_UPDATED=1; fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >&2
    else
        die "$2: install $1 (Debian/Ubuntu: sudo apt-get install -y $1)"
    fi
}
command -v redis-benchmark >/dev/null 2>&1 || apt_install redis-tools "redis-benchmark is missing"
command -v redis-cli >/dev/null 2>&1 || apt_install redis-tools "redis-cli is missing"
if [[ $HTTP_DURATION != 0 ]] && ! command -v wrk >/dev/null 2>&1; then apt_install wrk "wrk is missing"; fi
command -v curl >/dev/null 2>&1 || die "curl is missing"

# ---------------------------------------------------------------- build
if [[ $NO_BUILD != 1 ]]; then
    log "building: cargo build --release --bin seqd"
    cargo build --release --bin seqd >&2
fi
BUILD_SECONDS=$(( SECONDS - START_SECONDS ))
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SEQD_BIN="$TARGET_DIR/release/seqd"
[[ -x $SEQD_BIN ]] || die "$SEQD_BIN not found"

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/seqd-bench-resp.XXXXXX")
NAME="bench-$(od -An -N4 -tx4 /dev/urandom | tr -d ' \n')"
declare -A PID=() RPORT=() SPID=()
HTTP_ADDR=""
SHARED_KEY_SET=0
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ $SHARED_KEY_SET == 1 ]]; then
        timeout 5 redis-cli -h 127.0.0.1 -p "${RPORT[redis]}" DEL "$NAME" >/dev/null 2>&1 || true
    fi
    stop_servers
    finish_tmp "$rc"
    exit "$rc"
}
trap_cleanup

# A private copy, so a concurrent `cargo build` cannot swap the binary mid-run.
cp "$SEQD_BIN" "$TMP/seqd"
SEQD_BIN="$TMP/seqd"

rcli() { # rcli TARGET ARGS...: one command, its reply without the trailing \r
    local t=$1; shift
    timeout 10 redis-cli -h 127.0.0.1 -p "${RPORT[$t]}" "$@" 2>&1 | tr -d '\r'
}

# ---------------------------------------------------------------- redis-server
free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    else
        echo $(( 20000 + RANDOM % 40000 ))
    fi
}

REDIS_NOTE=""
RPORT[redis]=$SHARED_REDIS_PORT
if [[ $OWN_REDIS != 1 ]] && [[ $(rcli redis PING 2>/dev/null) == PONG ]]; then
    REDIS_NOTE="the redis-server already running on 127.0.0.1:$SHARED_REDIS_PORT"
else
    command -v redis-server >/dev/null 2>&1 || apt_install redis-server "no redis-server answers on 127.0.0.1:$SHARED_REDIS_PORT and none is installed"
    for attempt in 1 2 3 4 5; do
        RPORT[redis]=$(free_port)
        redis-server --bind 127.0.0.1 --port "${RPORT[redis]}" --save '' --appendonly no \
            --dir "$TMP" --daemonize no --logfile "$TMP/redis.log" >/dev/null 2>&1 &
        PID[redis]=$!
        for i in $(seq 1 50); do
            [[ $(rcli redis PING 2>/dev/null) == PONG ]] && break 2
            kill -0 "${PID[redis]}" 2>/dev/null || break
            sleep 0.1
        done
        kill "${PID[redis]}" 2>/dev/null || true
        wait "${PID[redis]}" 2>/dev/null || true
        unset 'PID[redis]'
    done
    [[ -n ${PID[redis]:-} ]] || die "could not start a redis-server (see $TMP/redis.log)"
    REDIS_NOTE="a redis-server started by this script on 127.0.0.1:${RPORT[redis]} (--save '' --appendonly no)"
fi
REDIS_INFO=$(rcli redis INFO server)
REDIS_VERSION=$(sed -n 's/^redis_version://p' <<<"$REDIS_INFO")
SPID[redis]=$(sed -n 's/^process_id://p' <<<"$REDIS_INFO")
REDIS_SAVE=$(rcli redis CONFIG GET save | sed -n 2p)
REDIS_AOF=$(rcli redis CONFIG GET appendonly | sed -n 2p)
REDIS_IO_THREADS=$(rcli redis CONFIG GET io-threads | sed -n 2p)
[[ -r /proc/${SPID[redis]}/stat ]] || SPID[redis]="" # elsewhere (a container): no CPU column
log "redis: $REDIS_NOTE, version $REDIS_VERSION, pid ${SPID[redis]:-unknown}, save '$REDIS_SAVE', appendonly $REDIS_AOF, io-threads $REDIS_IO_THREADS"
[[ $(rcli redis EXISTS "$NAME") == 0 ]] || die "redis already has a key $NAME"
[[ $(rcli redis SET "$NAME" 0) == OK ]] || die "redis: SET $NAME 0 failed"
[[ -n ${PID[redis]:-} ]] || SHARED_KEY_SET=1

# ---------------------------------------------------------------- seqd
"$SEQD_BIN" serve --database-url "sqlite://$TMP/bench.db?mode=rwc" --listen 127.0.0.1:0 \
    --resp-listen 127.0.0.1:0 --log-format json "${SEQD_ARGS[@]}" >"$TMP/seqd.log" 2>&1 &
PID[seqd]=$!
SPID[seqd]=${PID[seqd]}
HTTP_ADDR=$(seqd_listen seqd "$TMP/seqd.log")
RESP_ADDR=$(grep -o '"resp_listen":"[^"]*"' "$TMP/seqd.log" | head -n1 | cut -d'"' -f4)
[[ $RESP_ADDR == 127.0.0.1:* ]] || die "seqd logged no RESP address (is --resp-listen in this build?)"
RPORT[seqd]=${RESP_ADDR##*:}
log "seqd: pid ${PID[seqd]}, HTTP on $HTTP_ADDR, RESP on $RESP_ADDR"

code=$(curl -s -o "$TMP/create.out" -w '%{http_code}' --max-time 10 -X POST "http://$HTTP_ADDR/v1/sequences" \
    -H 'content-type: application/json' -d "{\"name\":\"$NAME\",\"start\":1,\"step\":1000}")
[[ $code == 201 ]] || { cat "$TMP/create.out" >&2; die "creating $NAME answered $code"; }

# Sanity: the same commands answer integers on both; seqd's INCRBY is the last of n
# consecutive IDs; SEQD.BATCH and /batch answer n IDs.
for t in redis seqd; do
    [[ $(rcli "$t" PING) == PONG ]] || die "$t: PING failed"
    a=$(rcli "$t" INCR "$NAME"); b=$(rcli "$t" INCRBY "$NAME" "$BATCH"); c=$(rcli "$t" INCR "$NAME")
    [[ $a =~ ^[0-9]+$ && $b =~ ^[0-9]+$ && $c =~ ^[0-9]+$ ]] || die "$t: INCR / INCRBY answered '$a' '$b' '$c'"
    (( b >= a + BATCH && c > b )) || die "$t: INCR $a, INCRBY $BATCH $b, INCR $c: not increasing by $BATCH"
done
n=$(rcli seqd SEQD.BATCH "$NAME" "$BATCH" | grep -c '^[0-9][0-9]*$' || true)
[[ $n == "$BATCH" ]] || die "seqd: SEQD.BATCH $NAME $BATCH answered $n integers"
BATCH_PATH="/v1/sequences/$NAME/batch?count=$BATCH"
n=$(curl -sf --max-time 5 -H 'Accept: application/json' "http://$HTTP_ADDR$BATCH_PATH" | tr ',[' '\n\n' | grep -c '^[0-9][0-9]*]\?}\?$' || true)
[[ $n == "$BATCH" ]] || die "seqd: GET $BATCH_PATH answered $n IDs, expected $BATCH"

# ---------------------------------------------------------------- runs
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { # user + system ticks of a pid so far; "" when unknown
    [[ -n $1 && -r /proc/$1/stat ]] || { echo ""; return; }
    sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}
per_req_us() { # per_req_us TICKS0 TICKS1 REQUESTS
    [[ -n $1 && -n $2 ]] || { echo -; return; }
    awk -v d=$(( $2 - $1 )) -v hz="$CLK_TCK" -v n="$3" 'BEGIN { printf "%.2f", d / hz * 1e6 / n }'
}
buffer_waits() {
    curl -s --max-time 10 "http://$HTTP_ADDR/v1/sequences/$NAME" | grep -o '"waits":[0-9]*' | head -n1 | cut -d: -f2
}

declare -A W_LABEL=(
    [incr]="INCR name, -c $CONNECTIONS"
    [pipe]="INCR name, -c $CONNECTIONS -P $PIPELINE"
    [incrby]="INCRBY name $BATCH, -c $CONNECTIONS"
    [sbatch]="SEQD.BATCH name $BATCH, -c $CONNECTIONS"
    [http]="GET /batch?count=$BATCH (HTTP, JSON), wrk -t$WRK_THREADS -c$CONNECTIONS"
)
declare -A W_N=([incr]=$N_INCR [pipe]=$N_PIPE [incrby]=$N_INCRBY [sbatch]=$N_SBATCH)
declare -A W_P=([incr]=1 [pipe]=$PIPELINE [incrby]=1 [sbatch]=1)
declare -A W_IDS=([incr]=1 [pipe]=1 [incrby]=$BATCH [sbatch]=$BATCH [http]=$BATCH)
declare -A W_CMD=([incr]="INCR $NAME" [pipe]="INCR $NAME" [incrby]="INCRBY $NAME $BATCH" [sbatch]="SEQD.BATCH $NAME $BATCH")

RESULTS="$TMP/results.tsv" # round target workload requests rps p50_ms p99_ms server_us client_cpu drawn
: >"$RESULTS"
: >"$TMP/seqd-runs"
: >"$TMP/config-warnings"
TIMEFORMAT='%U %S %R'

# run_rb TARGET WORKLOAD N: one redis-benchmark run; prints
# "requests rps p50_ms p99_ms server_us client_cpu drawn".
run_rb() {
    local t=$1 w=$2 n=$3 cmd before after c0 c1 line u s r
    read -r -a cmd <<<"${W_CMD[$w]}"
    before=$(rcli "$t" INCR "$NAME")
    c0=$(cpu_ticks "${SPID[$t]}")
    if ! { time timeout "$RUN_TIMEOUT" redis-benchmark -h 127.0.0.1 -p "${RPORT[$t]}" -c "$CONNECTIONS" \
            -n "$n" -P "${W_P[$w]}" --csv "${cmd[@]}" >"$TMP/rb.out" 2>"$TMP/rb.err"; } 2>"$TMP/rb.time"; then
        cat "$TMP/rb.out" "$TMP/rb.err" >&2
        die "redis-benchmark failed on $t $w"
    fi
    c1=$(cpu_ticks "${SPID[$t]}")
    after=$(rcli "$t" INCR "$NAME")
    [[ $before =~ ^[0-9]+$ && $after =~ ^[0-9]+$ ]] || die "$t: INCR $NAME answered '$before' / '$after' around $w"
    if [[ $t == seqd ]]; then # counted in files: this runs in a subshell
        echo "$w" >>"$TMP/seqd-runs"
        if grep -q 'Could not fetch server CONFIG' "$TMP/rb.err"; then echo "$w" >>"$TMP/config-warnings"; fi
    fi
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    line=$(sed -n 2p "$TMP/rb.out" | tr -d '"' | awk -F, '{print $(NF-6), $(NF-3), $(NF-1)}')
    [[ -n $line ]] || { cat "$TMP/rb.out" "$TMP/rb.err" >&2; die "no CSV line from redis-benchmark on $t $w"; }
    read -r u s r <"$TMP/rb.time"
    local drawn=$(( after - before - 1 ))
    (( drawn >= n * W_IDS[$w] )) || die "$t $w: the counter moved by $drawn for $n requests of ${W_IDS[$w]} IDs: error replies? ($(cat "$TMP/rb.err"))"
    printf '%s %s %s %s %s\n' "$n" "$line" "$(per_req_us "$c0" "$c1" "$n")" \
        "$(awk -v u="$u" -v s="$s" -v r="$r" 'BEGIN { printf "%.2f", (u + s) / r }')" "$drawn"
}

field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

# run_wrk SECONDS: one wrk run on /batch; prints the same fields as run_rb.
run_wrk() {
    local d=$1 before after c0 c1 out line u s r
    before=$(rcli seqd INCR "$NAME")
    c0=$(cpu_ticks "${SPID[seqd]}")
    if ! { time timeout "$RUN_TIMEOUT" wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${d}s" --timeout 5s -s "$LUA_DIR/report.lua" \
            -H 'Accept: application/json' "http://$HTTP_ADDR$BATCH_PATH" >"$TMP/wrk.out" 2>&1; } 2>"$TMP/wrk.time"; then
        cat "$TMP/wrk.out" >&2
        die "wrk failed"
    fi
    c1=$(cpu_ticks "${SPID[seqd]}")
    after=$(rcli seqd INCR "$NAME")
    line=$(sed -n 's/^BENCH //p' "$TMP/wrk.out")
    [[ -n $line ]] || { cat "$TMP/wrk.out" >&2; die "no BENCH line from wrk"; }
    local errs=$(( $(field "$line" non2xx) + $(field "$line" connect) + $(field "$line" read) + $(field "$line" write) + $(field "$line" timeout) ))
    (( errs == 0 )) || { cat "$TMP/wrk.out" >&2; die "wrk counted $errs errors on /batch"; }
    local n drawn=$(( after - before - 1 ))
    n=$(field "$line" requests)
    (( drawn >= n * BATCH )) || die "/batch: the counter moved by $drawn for $n requests of $BATCH IDs"
    read -r u s r <"$TMP/wrk.time"
    printf '%s %s %s %s %s %s %s\n' "$n" "$(field "$line" rps)" \
        "$(awk -v x="$(field "$line" p50_us)" 'BEGIN { printf "%.3f", x / 1000 }')" \
        "$(awk -v x="$(field "$line" p99_us)" 'BEGIN { printf "%.3f", x / 1000 }')" \
        "$(per_req_us "$c0" "$c1" "$n")" "$(awk -v u="$u" -v s="$s" -v r="$r" 'BEGIN { printf "%.2f", (u + s) / r }')" "$drawn"
}

measure() { # measure ROUND TARGET WORKLOAD
    local res
    if [[ $3 == http ]]; then res=$(run_wrk "$HTTP_DURATION"); else res=$(run_rb "$2" "$3" "${W_N[$3]}"); fi
    local a; read -r -a a <<<"$res"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${a[@]}" >>"$RESULTS"
    log "round $1 $2 $3: $(printf '%.0f' "${a[1]}") req/s ($(awk -v r="${a[1]}" -v k="${W_IDS[$3]}" 'BEGIN { printf "%.0f", r * k }') IDs/s), p50 ${a[2]} ms, p99 ${a[3]} ms, server CPU ${a[4]} us/req, client CPU ${a[5]}"
}

RESP_W=(incr pipe incrby)
SEQD_ONLY=()
[[ $HTTP_DURATION != 0 ]] && SEQD_ONLY+=(http)
[[ $N_SBATCH != 0 ]] && SEQD_ONLY+=(sbatch)

# ---------------------------------------------------------------- machine
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
NPROC=$(nproc)
CPU_MODEL=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^[[:space:]]*//')
RUSTC=$(rustc -V 2>/dev/null || echo unknown)
KERNEL=$(uname -sr)
RB_VERSION=$(redis-benchmark --version 2>/dev/null | awk '{print $2}')
WRK_VERSION=$( (wrk -v 2>&1 || true) | head -n1 | awk '{print $1, $2}')
GIT_REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
GIT_DIRTY=$(git status --porcelain 2>/dev/null | head -n1)
log "machine: $NPROC CPUs ($CPU_MODEL), $KERNEL; load average before: $LOAD_BEFORE"

if [[ $WARMUP != 0 ]]; then
    log "warming up"
    for w in "${RESP_W[@]}"; do
        for t in redis seqd; do run_rb "$t" "$w" $(( W_N[$w] / 10 > 10000 ? W_N[$w] / 10 : 10000 )) >/dev/null; done
    done
    [[ $HTTP_DURATION != 0 ]] && run_wrk 1 >/dev/null
    [[ $N_SBATCH != 0 ]] && run_rb seqd sbatch $(( N_SBATCH / 10 > 1000 ? N_SBATCH / 10 : 1000 )) >/dev/null
fi
WAITS_BEFORE=$(buffer_waits)

log "measuring: $ROUNDS rounds"
declare -A ROUND_LOAD=()
for round in $(seq 1 "$ROUNDS"); do
    ROUND_LOAD[$round]=$(cut -d' ' -f1 /proc/loadavg)
    if (( round % 2 == 1 )); then order=(redis seqd); else order=(seqd redis); fi
    for w in "${RESP_W[@]}"; do
        for t in "${order[@]}"; do measure "$round" "$t" "$w"; done
    done
    for w in "${SEQD_ONLY[@]}"; do measure "$round" seqd "$w"; done
done
WAITS_AFTER=$(buffer_waits)
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
RSS_SEQD=$(awk '/^VmRSS:/ {print $2}' "/proc/${PID[seqd]}/status")

# ---------------------------------------------------------------- report
# get TARGET WORKLOAD COLUMN STAT: STAT of a column over the rounds (med, min, max, list).
get() {
    awk -F'\t' -v t="$1" -v w="$2" -v c="$3" -v stat="$4" '
        $2 == t && $3 == w { v[++n] = $c + 0; l = l (l == "" ? "" : " ") $c }
        END {
            if (n == 0) { print "-"; exit }
            for (i = 2; i <= n; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
            if (stat == "med") printf "%.6f\n", (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)
            else if (stat == "min") printf "%.6f\n", v[1]
            else if (stat == "max") printf "%.6f\n", v[n]
            else print l
        }' "$RESULTS"
}
at() { awk -F'\t' -v r="$1" -v t="$2" -v w="$3" -v c="$4" '$1 == r && $2 == t && $3 == w { print $c }' "$RESULTS"; }
num() { printf "%.${1}f" "$2"; }
commas() { printf '%.0f' "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/;ta'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 >= b + 0) ? 1 : 0 }'; }
spread() { # spread TARGET WORKLOAD: "min-max (±x% of the median)"
    local lo hi med
    lo=$(get "$1" "$2" 5 min); hi=$(get "$1" "$2" 5 max); med=$(get "$1" "$2" 5 med)
    printf '%s-%s (%s)' "$(commas "$lo")" "$(commas "$hi")" "$(awk -v l="$lo" -v h="$hi" -v m="$med" 'BEGIN { printf "%.0f%% of the median", (h - l) / m * 100 }')"
}
round_ratios() { # seqd / redis of each round
    local r out=""
    for r in $(seq 1 "$ROUNDS"); do out+="${out:+ / }$(ratio "$(at "$r" seqd "$1" 5)" "$(at "$r" redis "$1" 5)")"; done
    echo "$out"
}
mark() { [[ $1 == 1 ]] && echo met || echo "**not met**"; }

ELAPSED=$(( SECONDS - START_SECONDS ))
SEQD_RB_RUNS=$(wc -l <"$TMP/seqd-runs")
CONFIG_WARNINGS=$(wc -l <"$TMP/config-warnings")
{
    echo "Run of $(date -u '+%Y-%m-%d %H:%M UTC'): \`scripts/bench-resp.sh $ROUNDS\`, $ELAPSED s in all ($BUILD_SECONDS s of them \`cargo build\`)."
    echo
    echo "- Machine: $NPROC CPUs (\`nproc\`), $CPU_MODEL; $KERNEL; $RUSTC; redis-benchmark $RB_VERSION$([[ $HTTP_DURATION != 0 ]] && echo "; $WRK_VERSION")."
    echo "- redis-server $REDIS_VERSION: $REDIS_NOTE; save '$REDIS_SAVE', appendonly $REDIS_AOF, io-threads $REDIS_IO_THREADS."
    echo "- seqd built from git $GIT_REV$([[ -n $GIT_DIRTY ]] && echo ' with uncommitted changes in the working tree'), release profile, on a temporary SQLite file; $([[ ${#SEQD_ARGS[@]} -gt 0 ]] && echo "extra flags \`${SEQD_ARGS[*]}\`, otherwise ")default settings."
    echo "- Load average (1/5/15 min) before: $LOAD_BEFORE; after: $LOAD_AFTER."
    echo "- Runs: redis-benchmark (one thread) with $CONNECTIONS connections, -n $N_INCR (INCR), $N_PIPE (-P $PIPELINE), $N_INCRBY (INCRBY)$([[ $N_SBATCH != 0 ]] && echo ", $N_SBATCH (SEQD.BATCH)")$([[ $HTTP_DURATION != 0 ]] && echo "; wrk -t$WRK_THREADS -c$CONNECTIONS -d${HTTP_DURATION}s on \`/batch\`"); the same name on both servers."
    echo
    echo "Medians over $ROUNDS round$( (( ROUNDS > 1 )) && echo s) (redis-server first in odd rounds, seqd first in even ones):"
    echo
    echo "| workload | redis-server req/s | seqd req/s | seqd / redis (medians) | goal | seqd / redis, each round |"
    echo "|---|---:|---:|---:|---|---|"
    declare -A GOAL=([incr]=1.0 [pipe]=0.8)
    for w in "${RESP_W[@]}"; do
        rr=$(get redis "$w" 5 med); sr=$(get seqd "$w" 5 med)
        if [[ -n ${GOAL[$w]:-} ]]; then
            g=">= ${GOAL[$w]}x: $(mark "$(ge "$(awk -v a="$sr" -v b="$rr" 'BEGIN { printf "%.4f", a / b }')" "${GOAL[$w]}")")"
        else g="-"; fi
        echo "| \`${W_LABEL[$w]}\` | $(commas "$rr") | $(commas "$sr") | $(ratio "$sr" "$rr") | $g | $(round_ratios "$w") |"
    done
    echo
    echo "IDs per second ($BATCH IDs a request; medians):"
    echo
    echo "| server, request | req/s | IDs/s | vs seqd \`/batch\` |"
    echo "|---|---:|---:|---:|"
    hb=$( [[ $HTTP_DURATION != 0 ]] && awk -v r="$(get seqd http 5 med)" -v k="$BATCH" 'BEGIN { print r * k }' || echo "")
    for tw in "seqd incrby" "seqd sbatch" "seqd http" "redis incrby"; do
        read -r t w <<<"$tw"
        [[ $(get "$t" "$w" 5 med) == - ]] && continue
        r=$(get "$t" "$w" 5 med); ids=$(awk -v r="$r" -v k="$BATCH" 'BEGIN { print r * k }')
        case $tw in
            "seqd incrby") what="seqd, RESP \`INCRBY name $BATCH\` (one integer: the last of $BATCH consecutive IDs)" ;;
            "seqd sbatch") what="seqd, RESP \`SEQD.BATCH name $BATCH\` (an array of $BATCH integers)" ;;
            "seqd http") what="seqd, HTTP \`GET /v1/sequences/name/batch?count=$BATCH\` (JSON, $BATCH IDs)" ;;
            "redis incrby") what="redis-server, \`INCRBY name $BATCH\`" ;;
        esac
        echo "| $what | $(commas "$r") | $(commas "$ids") | $([[ -n $hb ]] && ratio "$ids" "$hb" || echo -) |"
    done
    echo
    echo "Every round (req/s; load: the 1-minute load average when the round began):"
    echo
    hdr="| round | load | first |"; sep="|---:|---:|---|"
    for w in "${RESP_W[@]}"; do hdr+=" $w redis | $w seqd | $w seqd/redis |"; sep+="---:|---:|---:|"; done
    for w in "${SEQD_ONLY[@]}"; do hdr+=" $w seqd |"; sep+="---:|"; done
    echo "$hdr"; echo "$sep"
    for r in $(seq 1 "$ROUNDS"); do
        line="| $r | ${ROUND_LOAD[$r]} | $( (( r % 2 == 1 )) && echo redis || echo seqd ) |"
        for w in "${RESP_W[@]}"; do
            a=$(at "$r" redis "$w" 5); b=$(at "$r" seqd "$w" 5)
            line+=" $(commas "$a") | $(commas "$b") | $(ratio "$b" "$a") |"
        done
        for w in "${SEQD_ONLY[@]}"; do line+=" $(commas "$(at "$r" seqd "$w" 5)") |"; done
        echo "$line"
    done
    echo
    echo "Spread over the rounds (req/s, lowest-highest, and that range as a share of the median):"
    echo
    echo "| workload | redis-server | seqd |"
    echo "|---|---|---|"
    for w in "${RESP_W[@]}"; do echo "| \`${W_LABEL[$w]}\` | $(spread redis "$w") | $(spread seqd "$w") |"; done
    for w in "${SEQD_ONLY[@]}"; do echo "| \`${W_LABEL[$w]}\` | - | $(spread seqd "$w") |"; done
    echo
    echo "Latency (the load generator's p50 and p99, medians over the rounds), CPU time of the server process per"
    echo "request (user + system, /proc; independent of how the CPUs were shared), and the load generator's CPU"
    echo "(user + system over the run's wall time; 1.00 = one whole CPU):"
    echo
    echo "| server | workload | p50 | p99 | server CPU/req | client CPU |"
    echo "|---|---|---:|---:|---:|---:|"
    for w in "${RESP_W[@]}" "${SEQD_ONLY[@]}"; do
        for t in redis seqd; do
            [[ $(get "$t" "$w" 5 med) == - ]] && continue
            cpu=$(get "$t" "$w" 8 med); [[ $(get "$t" "$w" 8 list) == *-* ]] && cpu=-
            echo "| $t | \`${W_LABEL[$w]}\` | $(num 3 "$(get "$t" "$w" 6 med)") ms | $(num 3 "$(get "$t" "$w" 7 med)") ms | $([[ $cpu == - ]] && echo - || echo "$(num 2 "$cpu") µs") | $(num 2 "$(get "$t" "$w" 9 med)") |"
        done
    done
    echo
    echo "Checks (same run):"
    echo
    echo "- every run moved the name's counter by at least requests x IDs per request (one \`INCR\` before and after"
    echo "  each run): no error replies counted as requests."
    echo "- seqd buffer waits (requests that found both segments empty) during the measured runs: $(( WAITS_AFTER - WAITS_BEFORE ))."
    echo "- redis-benchmark printed \"WARNING: Could not fetch server CONFIG\" on $CONFIG_WARNINGS of its $SEQD_RB_RUNS runs against"
    echo "  seqd (it asks \`CONFIG GET save\` and \`appendonly\` on a separate connection before the run, to print them in its"
    echo "  long report; seqd does not serve CONFIG)."
    echo "- seqd RSS after the runs: $(awk -v k="$RSS_SEQD" 'BEGIN { printf "%.1f MiB", k / 1024 }')."
} >"$TMP/report.md"

echo
cat "$TMP/report.md"
echo
log "done in $ELAPSED s"
