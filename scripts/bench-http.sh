#!/usr/bin/env bash
# HTTP load benchmark: seqd against a minimal axum baseline, side by side, in one run.
#
#   scripts/bench-http.sh
#
# 1. builds `seqd` and `examples/baseline.rs` in release mode;
# 2. starts, each on its own 127.0.0.1 port (picked by the kernel): the baseline
#    (one AtomicU64::fetch_add behind axum, the ceiling of any HTTP ID service here),
#    seqd on a temporary SQLite file, and seqd on PostgreSQL in a fresh schema
#    seqd_bench_<random> (skipped with a message when unreachable; dropped at the end);
# 3. creates the sequence `bench` (step 1000) on each seqd through POST /v1/sequences;
# 4. warms each server up, then loads each with wrk (50 connections, 2 threads,
#    10 s) on GET /v1/sequences/bench/next with Accept: text/plain, the same with
#    Accept: application/json, and /v1/sequences/bench/batch?count=1000, for several
#    rounds, the order of the targets reversed every round;
# 5. creates 10,000 sequences on seqd-sqlite, touches each once, and loads /next
#    round-robin over them (same wrk script against the baseline);
# 6. prints a Markdown table (medians over the rounds, seqd/baseline ratios, waits
#    and fetches of `bench` before/after, RSS) and writes it into BENCHMARKS.md's
#    "HTTP load" section, between the bench-http markers (the text around them is kept).
#
# Everything listens on 127.0.0.1; every server started here is stopped on exit.
# When run as root and wrk is missing, it is installed with apt-get. wrk and the
# server under test share the machine's CPUs: the "server CPU/req" column (CPU time
# of the server process per request, from /proc) does not depend on that split.
# For counts that other load on the machine does not perturb (instructions,
# allocations, clock reads per request), see scripts/bench/callgrind.sh.
#
# Environment (defaults in brackets):
#   BENCH_DURATION [10s]      wrk duration of each measured run (wrk syntax: 10s, 1m)
#   BENCH_ROUNDS [5]          rounds of every (target, endpoint) run
#   BENCH_WARMUP [2s]         wrk warm-up per target and endpoint (0 skips)
#   BENCH_CONNECTIONS [50]    wrk connections
#   BENCH_THREADS [2]         wrk threads
#   BENCH_BATCH [1000]        count of the batch endpoint
#   BENCH_LIVE [10000]        live sequences for the many-sequences run (0 skips it)
#   BENCH_POSTGRES_URL [postgres://postgres@127.0.0.1:5432/test]  (BENCH_POSTGRES=0 skips)
#   BENCH_WRITE [1]           1: write the results into BENCHMARKS.md; 0: print only
#   BENCH_OUT [BENCHMARKS.md] the file to write
#   BENCH_NO_BUILD [0]        1: use the binaries already in target/release
#   BENCH_SEQD_ARGS [--max-step 100000000]
#                             extra flags for every seqd. The default raises the segment cap: at the
#                             /batch rates here (about 60 M IDs/s on one sequence) a segment of the
#                             default --max-step (1,000,000) lasts 16 ms, and a fetch that CPU
#                             contention delays past that makes requests wait. 100,000,000 is 1.6 s of
#                             that traffic. BENCH_SEQD_ARGS="" measures the defaults.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

DURATION=${BENCH_DURATION:-10s}
ROUNDS=${BENCH_ROUNDS:-5}
WARMUP=${BENCH_WARMUP:-2s}
CONNECTIONS=${BENCH_CONNECTIONS:-50}
THREADS=${BENCH_THREADS:-2}
BATCH=${BENCH_BATCH:-1000}
LIVE=${BENCH_LIVE:-10000}
PG_URL=${BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}
USE_PG=${BENCH_POSTGRES:-1}
WRITE=${BENCH_WRITE:-1}
OUT=${BENCH_OUT:-$ROOT/BENCHMARKS.md}
NO_BUILD=${BENCH_NO_BUILD:-0}
read -r -a SEQD_ARGS <<<"${BENCH_SEQD_ARGS---max-step 100000000}"
LUA_DIR="$ROOT/scripts/bench"

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
# shellcheck source=scripts/bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"

# wrk duration -> whole seconds (for timeouts).
secs() {
    local d=$1
    case $d in
        *ms) echo 1 ;;
        *s) echo "${d%s}" ;;
        *m) echo $(( ${d%m} * 60 )) ;;
        *h) echo $(( ${d%h} * 3600 )) ;;
        *) echo "$d" ;;
    esac
}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS must be a positive integer"
[[ $(secs "$DURATION") =~ ^[0-9]+$ ]] || die "BENCH_DURATION must look like 10s, 1m"
RUN_TIMEOUT=$(( $(secs "$DURATION") + 30 ))

# ---------------------------------------------------------------- tools
if ! command -v wrk >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        log "wrk is missing: installing it (apt-get update; apt-get install -y wrk)"
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >&2
    else
        die "wrk is missing: install it (Debian/Ubuntu: sudo apt-get install -y wrk)"
    fi
fi
command -v curl >/dev/null 2>&1 || die "curl is missing"

# ---------------------------------------------------------------- build
if [[ $NO_BUILD != 1 ]]; then
    log "building: cargo build --release --bin seqd --example baseline"
    cargo build --release --bin seqd --example baseline >&2
fi
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SEQD_BIN="$TARGET_DIR/release/seqd"
BASE_BIN="$TARGET_DIR/release/examples/baseline"
[[ -x $SEQD_BIN && -x $BASE_BIN ]] || die "binaries not found under $TARGET_DIR/release"

# ---------------------------------------------------------------- cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/seqd-bench.XXXXXX")
declare -A PID=() ADDR=()
PG_SCHEMA=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_servers
    if [[ -n $PG_SCHEMA ]]; then
        PGCONNECT_TIMEOUT=5 timeout 20 psql "$PG_URL" -qAtc "DROP SCHEMA IF EXISTS $PG_SCHEMA CASCADE" >/dev/null 2>&1 \
            && log "dropped PostgreSQL schema $PG_SCHEMA" \
            || log "could not drop PostgreSQL schema $PG_SCHEMA: drop it by hand"
    fi
    finish_tmp "$rc"
    exit "$rc"
}
trap_cleanup

# Private copies, so a concurrent `cargo build` cannot swap the binaries mid-run.
cp "$SEQD_BIN" "$TMP/seqd"
cp "$BASE_BIN" "$TMP/baseline"
SEQD_BIN="$TMP/seqd"
BASE_BIN="$TMP/baseline"

# ---------------------------------------------------------------- servers
# start_seqd NAME DATABASE_URL: seqd on 127.0.0.1:0; its address comes from the
# start-up log line (JSON, field "listen").
start_seqd() {
    local name=$1 url=$2
    "$SEQD_BIN" --database-url "$url" --listen 127.0.0.1:0 --log-format json "${SEQD_ARGS[@]}" >"$TMP/$name.log" 2>&1 &
    PID[$name]=$!
    ADDR[$name]=$(seqd_listen "$name" "$TMP/$name.log")
    log "$name: pid ${PID[$name]} on http://${ADDR[$name]}"
}

start_baseline() {
    "$BASE_BIN" 127.0.0.1:0 >"$TMP/baseline.log" 2>&1 &
    PID[baseline]=$!
    local i addr=""
    for i in $(seq 1 100); do
        addr=$(sed -n 's#^listening on http://##p' "$TMP/baseline.log" 2>/dev/null | head -n1 || true)
        [[ -n $addr ]] && break
        kill -0 "${PID[baseline]}" 2>/dev/null || { cat "$TMP/baseline.log" >&2; die "baseline exited at start-up"; }
        sleep 0.1
    done
    [[ -n $addr ]] || die "baseline did not start within 10 s"
    ADDR[baseline]=$addr
    log "baseline: pid ${PID[baseline]} on http://$addr"
}

create_seq() { # create_seq TARGET NAME STEP
    local code
    code=$(curl -s -o "$TMP/create.out" -w '%{http_code}' --max-time 10 -X POST "http://${ADDR[$1]}/v1/sequences" \
        -H 'content-type: application/json' -d "{\"name\":\"$2\",\"step\":$3}")
    [[ $code == 201 ]] || { cat "$TMP/create.out" >&2; die "$1: creating $2 answered $code"; }
}

# buffer_field TARGET SEQUENCE FIELD: a number from GET /v1/sequences/{name} -> buffer.
buffer_field() {
    curl -s --max-time 10 "http://${ADDR[$1]}/v1/sequences/$2" \
        | grep -o "\"$3\":[0-9]*" | head -n1 | cut -d: -f2
}

# sum_fields TARGET: "waits fetches" summed over every buffer of GET /v1/sequences.
sum_fields() {
    curl -s --max-time 60 "http://${ADDR[$1]}/v1/sequences" \
        | grep -o '"\(waits\|fetches\)":[0-9]*' | tr ':"' '  ' \
        | awk '{s[$1] += $2} END {print s["waits"] + 0, s["fetches"] + 0}'
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/${PID[$1]}/status"; }

# CPU time of a server so far (user + system), in clock ticks.
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { sed 's/^.*) //' "/proc/${PID[$1]}/stat" | awk '{print $12 + $13}'; }

# ---------------------------------------------------------------- wrk
# Endpoints: name, path, Accept header, IDs per request.
ENDPOINTS=(next-text next-json batch)
declare -A EP_PATH=(
    [next-text]=/v1/sequences/bench/next
    [next-json]=/v1/sequences/bench/next
    [batch]="/v1/sequences/bench/batch?count=$BATCH"
    [live]=/
)
declare -A EP_ACCEPT=(
    [next-text]=text/plain
    [next-json]=application/json
    [batch]=application/json
    [live]=text/plain
)
declare -A EP_IDS=([next-text]=1 [next-json]=1 [batch]=$BATCH [live]=1)
declare -A EP_LABEL=(
    [next-text]="/next (text)"
    [next-json]="/next (JSON)"
    [batch]="/batch?count=$BATCH"
    [live]="/next (text), $LIVE names round-robin"
)

# run_wrk TARGET ENDPOINT DURATION: prints the BENCH line's fields.
run_wrk() {
    local target=$1 ep=$2 dur=$3 script=report.lua
    [[ $ep == live ]] && script=rotate.lua
    local out
    out=$(BENCH_LIVE_N=$LIVE timeout "$RUN_TIMEOUT" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$dur" --timeout 5s \
        -s "$LUA_DIR/$script" -H "Accept: ${EP_ACCEPT[$ep]}" "http://${ADDR[$target]}${EP_PATH[$ep]}" 2>&1) \
        || { printf '%s\n' "$out" >&2; die "wrk failed on $target $ep"; }
    local line
    line=$(printf '%s\n' "$out" | sed -n 's/^BENCH //p')
    [[ -n $line ]] || { printf '%s\n' "$out" >&2; die "no BENCH line from wrk on $target $ep"; }
    printf '%s\n' "$line"
}

field() { # field "k=v k=v" KEY
    printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

RESULTS="$TMP/results.tsv" # round target endpoint rps p50 p99 p999 errors waits cpu_us_per_request
: >"$RESULTS"

# waits_now TARGET ENDPOINT: the waits counter of the `bench` buffer; "-" for the
# baseline and for the round-robin runs (whose waits are summed over every buffer
# once before and once after all of them: listing 10,000 sequences per run would
# weigh on the RSS measured).
waits_now() {
    if [[ $1 == baseline || $2 == live ]]; then echo -
    else buffer_field "$1" bench waits
    fi
}

measure() { # measure ROUND TARGET ENDPOINT
    local line rps errs w0 w1 waits=- c0 c1 cpu
    w0=$(waits_now "$2" "$3")
    c0=$(cpu_ticks "$2")
    line=$(run_wrk "$2" "$3" "$DURATION")
    c1=$(cpu_ticks "$2")
    w1=$(waits_now "$2" "$3")
    cpu=$(awk -v d=$(( c1 - c0 )) -v hz="$CLK_TCK" -v n="$(field "$line" requests)" 'BEGIN { printf "%.2f", d / hz * 1e6 / n }')
    [[ $w0 == - ]] || waits=$(( w1 - w0 ))
    rps=$(field "$line" rps)
    errs=$(( $(field "$line" non2xx) + $(field "$line" connect) + $(field "$line" read) + $(field "$line" write) + $(field "$line" timeout) ))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$rps" \
        "$(field "$line" p50_us)" "$(field "$line" p99_us)" "$(field "$line" p999_us)" "$errs" "$waits" "$cpu" >>"$RESULTS"
    log "round $1 $2 $3: $(printf '%.0f' "$rps") req/s, p50 $(field "$line" p50_us) us, p99 $(field "$line" p99_us) us, p99.9 $(field "$line" p999_us) us, errors $errs, waits $waits, server CPU $cpu us/request"
}

warm() { # warm TARGET ENDPOINT
    [[ $(secs "$WARMUP") == 0 || $WARMUP == 0 ]] && return 0
    run_wrk "$1" "$2" "$WARMUP" >/dev/null
}

# ---------------------------------------------------------------- machine
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
NPROC=$(nproc)
CPU_MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)
RUSTC=$(rustc -V 2>/dev/null || echo unknown)
KERNEL=$(uname -sr)
WRK_VERSION=$( (wrk -v 2>&1 || true) | head -n1 | awk '{print $1, $2}')
GIT_REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
GIT_DIRTY=$(git status --porcelain --untracked-files=no 2>/dev/null | head -n1)
log "machine: $NPROC CPUs ($CPU_MODEL), $KERNEL, $RUSTC; load average before: $LOAD_BEFORE"

# ---------------------------------------------------------------- start
TARGETS=(baseline seqd-sqlite)
start_baseline
start_seqd seqd-sqlite "sqlite://$TMP/bench.db?mode=rwc"

PG_NOTE=""
if [[ $USE_PG == 1 ]]; then
    if ! command -v psql >/dev/null 2>&1; then
        PG_NOTE="PostgreSQL skipped: psql not installed"
    elif ! PGCONNECT_TIMEOUT=3 timeout 10 psql "$PG_URL" -qAtc 'SELECT 1' >/dev/null 2>&1; then
        PG_NOTE="PostgreSQL skipped: $PG_URL unreachable"
    else
        PG_SCHEMA="seqd_bench_$(od -An -N4 -tx4 /dev/urandom | tr -d ' \n')"
        PGCONNECT_TIMEOUT=5 timeout 20 psql "$PG_URL" -qAtc "CREATE SCHEMA $PG_SCHEMA" >/dev/null
        sep='?'
        [[ $PG_URL == *\?* ]] && sep='&'
        start_seqd seqd-postgres "${PG_URL}${sep}options=-csearch_path%3D${PG_SCHEMA}"
        TARGETS+=(seqd-postgres)
    fi
else
    PG_NOTE="PostgreSQL skipped: BENCH_POSTGRES=0"
fi
[[ -n $PG_NOTE ]] && log "$PG_NOTE"
SEQDS=("${TARGETS[@]:1}")

for t in "${SEQDS[@]}"; do create_seq "$t" bench 1000; done

# Sanity: every target answers each endpoint with 200 and the right format.
for t in "${TARGETS[@]}"; do
    body=$(curl -sf --max-time 5 -H 'Accept: text/plain' "http://${ADDR[$t]}/v1/sequences/bench/next") || die "$t: /next failed"
    [[ $body =~ ^[0-9]+$ ]] || die "$t: /next (text) answered '$body'"
    body=$(curl -sf --max-time 5 -H 'Accept: application/json' "http://${ADDR[$t]}/v1/sequences/bench/next") || die "$t: /next failed"
    [[ $body =~ ^\{\"name\":\"bench\",\"id\":[0-9]+\}$ ]] || die "$t: /next (JSON) answered '$body'"
    n=$(curl -sf --max-time 5 "http://${ADDR[$t]}${EP_PATH[batch]}" | tr ',' '\n' | grep -c '[0-9]') || die "$t: /batch failed"
    [[ $n == "$BATCH" ]] || die "$t: /batch answered $n IDs, expected $BATCH"
done

log "warming up (${WARMUP} per target and endpoint)"
for t in "${TARGETS[@]}"; do
    for ep in "${ENDPOINTS[@]}"; do warm "$t" "$ep"; done
done

declare -A WAITS_BEFORE=() WAITS_AFTER=() FETCHES_BEFORE=() FETCHES_AFTER=() RSS=() RSS_START=()
for t in "${SEQDS[@]}"; do
    WAITS_BEFORE[$t]=$(buffer_field "$t" bench waits)
    FETCHES_BEFORE[$t]=$(buffer_field "$t" bench fetches)
done

# ---------------------------------------------------------------- measured runs
log "measuring: $ROUNDS rounds x ${#ENDPOINTS[@]} endpoints x ${#TARGETS[@]} targets x $DURATION"
for round in $(seq 1 "$ROUNDS"); do
    order=("${TARGETS[@]}")
    if (( round % 2 == 0 )); then
        order=()
        for (( i=${#TARGETS[@]}-1; i>=0; i-- )); do order+=("${TARGETS[$i]}"); done
    fi
    for ep in "${ENDPOINTS[@]}"; do
        for t in "${order[@]}"; do measure "$round" "$t" "$ep"; done
    done
done

for t in "${SEQDS[@]}"; do
    WAITS_AFTER[$t]=$(buffer_field "$t" bench waits)
    FETCHES_AFTER[$t]=$(buffer_field "$t" bench fetches)
done
for t in "${TARGETS[@]}"; do RSS[$t]=$(rss_kib "$t"); done

# ---------------------------------------------------------------- many live sequences
LIVE_NOTE=""
LIVE_TARGETS=()
if (( LIVE > 0 )); then
    lt=seqd-sqlite
    RSS_LIVE_BEFORE=$(rss_kib "$lt")
    log "creating and touching $LIVE sequences on $lt"
    if command -v python3 >/dev/null 2>&1; then
        mk=$(timeout 600 python3 "$LUA_DIR/mklive.py" "${ADDR[$lt]}" "$LIVE" live- 8) || die "creating the live sequences failed"
    else
        start_s=$(date +%s)
        seq 1 "$LIVE" | timeout 1200 xargs -P 8 -I{} sh -c \
            "curl -sf --max-time 10 -o /dev/null -X POST http://${ADDR[$lt]}/v1/sequences -H 'content-type: application/json' -d '{\"name\":\"live-{}\",\"step\":1000}' && curl -sf --max-time 10 -o /dev/null http://${ADDR[$lt]}/v1/sequences/live-{}/next" \
            || die "creating the live sequences failed"
        mk="created=$LIVE touched=$LIVE seconds=$(( $(date +%s) - start_s ))"
    fi
    LIVE_MK=$mk
    log "$mk"
    RSS_LIVE_TOUCHED=$(rss_kib "$lt")
    LIVE_TARGETS=(baseline "$lt")
    warm baseline live
    warm "$lt" live
    RSS_LIVE_WARM=$(rss_kib "$lt")
    read -r LIVE_WAITS_BEFORE LIVE_FETCHES_BEFORE < <(sum_fields "$lt")
    for round in $(seq 1 "$ROUNDS"); do
        if (( round % 2 == 1 )); then order=(baseline "$lt"); else order=("$lt" baseline); fi
        for t in "${order[@]}"; do measure "$round" "$t" live; done
    done
    RSS_LIVE_AFTER=$(rss_kib "$lt")
    read -r LIVE_WAITS_AFTER LIVE_FETCHES_AFTER < <(sum_fields "$lt")
    # What one Prometheus scrape costs with this many sequences.
    METRICS_BYTES=$(curl -s --max-time 60 -o /dev/null -w '%{size_download}' "http://${ADDR[$lt]}/metrics")
    RSS_LIVE_SCRAPED=$(rss_kib "$lt")
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report
# medians: "target endpoint" -> median rps / p50 / p99 / p99.9, median per-round
# ratio to the baseline, errors summed, the rounds' req/s.
SUMMARY="$TMP/summary.tsv"
awk -F'\t' '
function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
    k = $2 SUBSEP $3
    keys[k] = 1
    rps[k] = rps[k] " " $4; p50[k] = p50[k] " " $5; p99[k] = p99[k] " " $6; p999[k] = p999[k] " " $7
    err[k] += $8
    if ($9 == "-") wt[k] = "-"; else wt[k] += $9
    cpu[k] = cpu[k] " " $10
    r_rps[$1, $2, $3] = $4; r_p99[$1, $2, $3] = $6; rounds[$1] = 1
}
END {
    for (k in keys) {
        split(k, tk, SUBSEP); t = tk[1]; e = tk[2]
        rr = ""; pr = ""
        if (t != "baseline") {
            for (r in rounds) if ((r, t, e) in r_rps && (r, "baseline", e) in r_rps) {
                rr = rr " " r_rps[r, t, e] / r_rps[r, "baseline", e]
                pr = pr " " r_p99[r, t, e] / r_p99[r, "baseline", e]
            }
        }
        printf "%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%d\t%s\t%s\t%.1f\n", t, e, median(rps[k]), median(p50[k]), median(p99[k]), median(p999[k]),
            (rr == "" ? "-" : sprintf("%.3f", median(rr))), (pr == "" ? "-" : sprintf("%.3f", median(pr))), err[k], substr(rps[k], 2), wt[k], median(cpu[k])
    }
}' "$RESULTS" >"$SUMMARY"

commas() { # integer with thousands separators
    printf '%.0f' "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/;ta'
}
ms() { awk -v us="$1" 'BEGIN { printf "%.2f ms", us / 1000 }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
get() { awk -F'\t' -v t="$1" -v e="$2" -v c="$3" '$1 == t && $2 == e { print $c }' "$SUMMARY"; }

table_rows() { # table_rows ENDPOINT... : one row per target and endpoint
    local ep t rps ids rounds
    for ep in "$@"; do
        for t in "${TARGETS[@]}"; do
            [[ -n $(get "$t" "$ep" 1) ]] || continue
            rps=$(get "$t" "$ep" 3)
            ids=$(awk -v r="$rps" -v n="${EP_IDS[$ep]}" 'BEGIN { printf "%.0f", r * n }')
            rounds=$(get "$t" "$ep" 10 | tr ' ' '\n' | while read -r x; do commas "$x"; echo; done | paste -sd/ - | sed 's#/# / #g')
            printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
                "$t" "${EP_LABEL[$ep]}" "$(commas "$rps")" "$(commas "$ids")" \
                "$(ms "$(get "$t" "$ep" 4)")" "$(ms "$(get "$t" "$ep" 5)")" "$(ms "$(get "$t" "$ep" 6)")" "$(get "$t" "$ep" 12) µs" \
                "$(r=$(get "$t" "$ep" 7); [[ $r == - ]] && echo - || printf '%.2fx' "$r")" \
                "$(r=$(get "$t" "$ep" 8); [[ $r == - ]] && echo - || printf '%.2fx' "$r")" \
                "$(get "$t" "$ep" 9)" "$(get "$t" "$ep" 11)" "$rounds"
        done
    done
}

check() { # check DESCRIPTION OK(0/1)
    if [[ $2 == 1 ]]; then printf -- '- met: %s\n' "$1"; else printf -- '- **not met**: %s\n' "$1"; fi
}

REPORT="$TMP/report.md"
{
    echo "Run of $(date -u '+%Y-%m-%d %H:%M UTC'): \`scripts/bench-http.sh\` with BENCH_DURATION=$DURATION BENCH_ROUNDS=$ROUNDS"
    echo "BENCH_WARMUP=$WARMUP BENCH_CONNECTIONS=$CONNECTIONS BENCH_THREADS=$THREADS BENCH_BATCH=$BATCH BENCH_LIVE=$LIVE."
    echo
    echo "- Machine: $NPROC CPUs, $CPU_MODEL; $KERNEL; $RUSTC; $WRK_VERSION."
    echo "- wrk ($THREADS threads) and the server under test share the same $NPROC CPUs; the other servers idle meanwhile."
    echo "- Load average (1/5/15 min) before: $LOAD_BEFORE; after: $LOAD_AFTER (other work on the machine perturbs the numbers)."
    echo "- seqd built from git $GIT_REV$([[ -n $GIT_DIRTY ]] && echo ' with uncommitted changes in the working tree'); release profile; $([[ ${#SEQD_ARGS[@]} -gt 0 ]] && echo "extra flags \`${SEQD_ARGS[*]}\`, otherwise ")default settings (\`RUST_LOG\` unset: info)."
    [[ -n $PG_NOTE ]] && echo "- $PG_NOTE."
    echo
    echo "Medians over $ROUNDS rounds. Ratios are the median over rounds of seqd / baseline in the same round. Latencies are wrk's"
    echo "(closed loop: each of the $CONNECTIONS connections sends its next request when the previous is answered). \`errors\`: non-2xx"
    echo "answers and socket errors; \`waits\`: requests of the measured runs that found both segments empty (the buffer's"
    echo "\`waits\` counter, summed over the rounds), i.e. requests that waited for the database. \`server CPU/req\`: CPU time"
    echo "(user + system, from /proc) the server process used during the run divided by the requests answered: what a request"
    echo "costs the server, whatever share of the CPUs wrk left it."
    echo
    echo "| target | endpoint | req/s | IDs/s | p50 | p99 | p99.9 | server CPU/req | req/s vs baseline | p99 vs baseline | errors | waits | req/s per round |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    table_rows "${ENDPOINTS[@]}"
    echo
    echo "The \`bench\` sequence on each seqd (from \`GET /v1/sequences/bench\` -> \`buffer\`), after the warm-up and after the"
    echo "measured runs, and the resident memory of each process after the runs (\`VmRSS\`):"
    echo
    echo "| target | waits before | waits after | fetches before | fetches after | RSS after the runs |"
    echo "|---|---:|---:|---:|---:|---:|"
    echo "| baseline | - | - | - | - | $(mib "${RSS[baseline]}") |"
    for t in "${SEQDS[@]}"; do
        echo "| $t | ${WAITS_BEFORE[$t]} | ${WAITS_AFTER[$t]} | ${FETCHES_BEFORE[$t]} | ${FETCHES_AFTER[$t]} | $(mib "${RSS[$t]}") |"
    done
    if (( LIVE > 0 )); then
        echo
        echo "$LIVE live sequences on seqd-sqlite (created through \`POST /v1/sequences\` and touched once, $LIVE_MK), then"
        echo "\`GET /v1/sequences/live-<i>/next\` round-robin over all of them (\`scripts/bench/rotate.lua\`; the baseline gets the same"
        echo "requests and ignores the name; the waits of these runs are summed over all sequences below):"
        echo
        echo "| target | endpoint | req/s | IDs/s | p50 | p99 | p99.9 | server CPU/req | req/s vs baseline | p99 vs baseline | errors | waits | req/s per round |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        TARGETS_SAVE=("${TARGETS[@]}"); TARGETS=("${LIVE_TARGETS[@]}")
        table_rows live
        TARGETS=("${TARGETS_SAVE[@]}")
        echo
        echo "- waits summed over all sequences (one \`GET /v1/sequences\` before the measured runs, one after): $LIVE_WAITS_BEFORE"
        echo "  before, $LIVE_WAITS_AFTER after (the $LIVE touches are cold starts); fetches: $LIVE_FETCHES_BEFORE before, $LIVE_FETCHES_AFTER after."
        echo "- seqd-sqlite RSS: $(mib "$RSS_LIVE_BEFORE") with \`bench\` only; $(mib "$RSS_LIVE_TOUCHED") with $LIVE more live sequences;"
        echo "  $(mib "$RSS_LIVE_WARM") after the warm-up; $(mib "$RSS_LIVE_AFTER") after the round-robin runs (including one listing of"
        echo "  every sequence); $(mib "$RSS_LIVE_SCRAPED") after one more listing and one \`GET /metrics\` ($(commas "$METRICS_BYTES") bytes)."
    fi
    echo
    echo "Targets of the issue (same run):"
    echo
    for t in "${SEQDS[@]}"; do
        r=$(get "$t" next-text 7); p=$(get "$t" next-text 8)
        check "$t /next (text) req/s >= 0.85x baseline: $(printf '%.2fx' "$r")" "$(awk -v r="$r" 'BEGIN { print (r >= 0.85) ? 1 : 0 }')"
        check "$t /next (text) p99 <= 1.5x baseline: $(printf '%.2fx' "$p")" "$(awk -v r="$p" 'BEGIN { print (r <= 1.5) ? 1 : 0 }')"
        r=$(get "$t" next-json 7); p=$(get "$t" next-json 8)
        check "$t /next (JSON) req/s >= 0.85x baseline: $(printf '%.2fx' "$r")" "$(awk -v r="$r" 'BEGIN { print (r >= 0.85) ? 1 : 0 }')"
        check "$t /next (JSON) p99 <= 1.5x baseline: $(printf '%.2fx' "$p")" "$(awk -v r="$p" 'BEGIN { print (r <= 1.5) ? 1 : 0 }')"
        ids=$(awk -v r="$(get "$t" batch 3)" -v n="$BATCH" 'BEGIN { printf "%.0f", r * n }')
        check "$t /batch?count=$BATCH >= 10,000,000 IDs/s: $(commas "$ids")" "$(awk -v x="$ids" 'BEGIN { print (x >= 10000000) ? 1 : 0 }')"
        d=$(( WAITS_AFTER[$t] - WAITS_BEFORE[$t] ))
        check "$t zero waits during the runs: $d (/next text $(get "$t" next-text 11), /next JSON $(get "$t" next-json 11), /batch $(get "$t" batch 11))" "$([[ $d == 0 ]] && echo 1 || echo 0)"
    done
    if (( LIVE > 0 )); then
        d=$(( LIVE_WAITS_AFTER - LIVE_WAITS_BEFORE ))
        check "seqd-sqlite zero waits during the $LIVE-sequence runs: $d" "$([[ $d == 0 ]] && echo 1 || echo 0)"
    fi
} >"$REPORT"

echo
cat "$REPORT"
echo

# ---------------------------------------------------------------- BENCHMARKS.md
if [[ $WRITE == 1 ]]; then
    BEGIN_MARK='<!-- bench-http:begin (generated by scripts/bench-http.sh; edit outside the markers) -->'
    END_MARK='<!-- bench-http:end -->'
    [[ -f $OUT ]] || printf '# Benchmarks\n' >"$OUT"
    NEW="$TMP/benchmarks.md"
    if grep -q '^<!-- bench-http:begin' "$OUT" && grep -q '^<!-- bench-http:end' "$OUT"; then
        awk -v report="$REPORT" -v b="$BEGIN_MARK" -v e="$END_MARK" '
            /^<!-- bench-http:begin/ { print b; while ((getline l < report) > 0) print l; skip = 1; next }
            /^<!-- bench-http:end/ { print e; skip = 0; next }
            !skip { print }' "$OUT" >"$NEW"
    else
        {
            cat "$OUT"
            printf '\n## HTTP load\n\n'
            printf 'Reproduce with `scripts/bench-http.sh` (see the comment at its top for the settings).\n\n'
            printf '%s\n' "$BEGIN_MARK"
            cat "$REPORT"
            printf '%s\n' "$END_MARK"
        } >"$NEW"
    fi
    cat "$NEW" >"$OUT"
    log "wrote the results into $OUT"
fi
