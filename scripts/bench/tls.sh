#!/usr/bin/env bash
# What TLS costs on seqd's doors, side by side in one run (BENCHMARKS.md, "TLS"):
#
#   scripts/bench/tls.sh            (after cargo build --release --bin seqd)
#
# Starts two seqd on their own temporary SQLite files, one plain and one with
# --tls-cert/--tls-key (a CA and a certificate for localhost made here with
# openssl), each with a RESP listener, then, for BENCH_ROUNDS rounds, the order
# of the two reversed every round:
#   - wrk on GET /v1/sequences/bench/next (Accept: text/plain), 50 kept-alive
#     connections: requests per second and the server's CPU time per request
#     (user + system from /proc, divided by the requests answered);
#   - wrk with `Connection: close` (a new connection, and over TLS a new full
#     handshake, for every request): connections per second, CPU per connection;
#   - redis-benchmark INCR (-c 50), plain against --tls.
# Prints a Markdown table of the medians. Everything listens on 127.0.0.1;
# every process started here is stopped on exit.
#
# Environment: BENCH_ROUNDS [3], BENCH_DURATION [10s], BENCH_REQUESTS [200000]
# (redis-benchmark requests a run), SEQD [target/release/seqd].
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-10s}
REQUESTS=${BENCH_REQUESTS:-200000}
SEQD=${SEQD:-target/release/seqd}
[ -x "$SEQD" ] || { echo "no $SEQD: cargo build --release --bin seqd" >&2; exit 1; }
command -v wrk >/dev/null && command -v redis-benchmark >/dev/null && command -v openssl >/dev/null \
  || { echo "needs wrk, redis-benchmark (redis-tools) and openssl" >&2; exit 1; }

WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

# A CA and a server certificate for localhost and 127.0.0.1 (ECDSA P-256).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=seqd bench CA" -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj "/CN=localhost" -keyout "$WORK/server.key" -out "$WORK/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$WORK/san.ext"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" \
  -CAcreateserial -days 2 -extfile "$WORK/san.ext" -out "$WORK/server.pem" 2>/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

declare -A PID HTTP RESP SCHEME
start() { # name, extra flags...
  local name=$1; shift
  HTTP[$name]=$(free_port); RESP[$name]=$(free_port)
  RUST_LOG=warn "$SEQD" serve --listen "127.0.0.1:${HTTP[$name]}" --resp-listen "127.0.0.1:${RESP[$name]}" \
    --database-url "sqlite://$WORK/$name.db?mode=rwc" "$@" >"$WORK/$name.log" 2>&1 &
  PID[$name]=$!; PIDS+=("$!")
}
start plain
start tls --tls-cert "$WORK/server.pem" --tls-key "$WORK/server.key"
SCHEME[plain]=http; SCHEME[tls]=https
# The machine's redis-server over TLS (when its build has TLS), for INCR beside seqd's.
REDIS_TLS=""
RESP[redis]=$(free_port)
redis-server --port 0 --tls-port "${RESP[redis]}" --bind 127.0.0.1 --tls-cert-file "$WORK/server.pem" \
  --tls-key-file "$WORK/server.key" --tls-ca-cert-file "$WORK/ca.pem" --tls-auth-clients no \
  --save "" --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 1 50); do
  if redis-cli --tls --cacert "$WORK/ca.pem" --sni localhost -p "${RESP[redis]}" PING 2>/dev/null | grep -q PONG; then
    REDIS_TLS=1; break
  fi
  sleep 0.1
done

curl_to() { local name=$1; shift; curl -sS --cacert "$WORK/ca.pem" "$@"; }
for name in plain tls; do
  base="${SCHEME[$name]}://localhost:${HTTP[$name]}"
  for _ in $(seq 1 100); do curl_to "$name" -o /dev/null "$base/healthz" 2>/dev/null && break; sleep 0.1; done
  curl_to "$name" -o /dev/null -H 'content-type: application/json' \
    -d '{"name":"bench","start":1,"step":1000}' "$base/v1/sequences"
done

cpu_ticks() { sed 's/^.*) //' "/proc/${PID[$1]}/stat" | awk '{print $12 + $13}'; }
HZ=$(getconf CLK_TCK)

# One wrk run: prints "requests/s cpu_us_per_request".
wrk_run() { # name, extra wrk args...
  local name=$1; shift
  local url="${SCHEME[$name]}://localhost:${HTTP[$name]}/v1/sequences/bench/next"
  local before after out reqs rate
  before=$(cpu_ticks "$name")
  out=$(wrk -t2 -c50 -d"$DURATION" -H 'Accept: text/plain' "$@" "$url")
  after=$(cpu_ticks "$name")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  rate=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  awk -v r="$rate" -v n="$reqs" -v t=$((after - before)) -v hz="$HZ" \
    'BEGIN { printf "%.0f %.2f\n", r, (t / hz) * 1e6 / n }'
}

# One redis-benchmark run: prints requests/s.
resp_run() { # name
  local name=$1 tls=()
  [ "$name" != plain ] && tls=(--tls --cacert "$WORK/ca.pem" --sni localhost)
  redis-benchmark -h 127.0.0.1 -p "${RESP[$name]}" "${tls[@]}" -c 50 -n "$REQUESTS" -q INCR bench 2>/dev/null \
    | tr '\r' '\n' | awk '/requests per second/ { for (i = 2; i <= NF; i++) if ($i == "requests") print $(i - 1) }' \
    | tail -n1
}

declare -A KEEP CLOSE INCR
order=(plain tls)
for round in $(seq 1 "$ROUNDS"); do
  for name in "${order[@]}"; do
    KEEP[$name]+="$(wrk_run "$name")"$'\n'
    CLOSE[$name]+="$(wrk_run "$name" -H 'Connection: close')"$'\n'
    INCR[$name]+="$(resp_run "$name")"$'\n'
  done
  [ -n "$REDIS_TLS" ] && INCR[redis]+="$(resp_run redis)"$'\n'

  order=("${order[1]}" "${order[0]}")
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
col() { awk -v c="$1" 'NF {print $c}'; }
row() { # label, data var name, column
  local label=$1 var=$2 c=$3 p t
  local -n data=$var
  p=$(col "$c" <<<"${data[plain]}" | median); t=$(col "$c" <<<"${data[tls]}" | median)
  awk -v l="$label" -v p="$p" -v t="$t" 'BEGIN { printf "| %s | %s | %s | %.2fx |\n", l, p, t, t / p }'
}
echo "| $ROUNDS rounds, medians, $(nproc) cores | plain | TLS | TLS / plain |"
echo "|---|---|---|---|"
row "\`/next\`, kept alive: requests/s" KEEP 1
row "\`/next\`, kept alive: server CPU µs/request" KEEP 2
row "\`/next\`, a connection each (TLS: a full handshake): connections/s" CLOSE 1
row "\`/next\`, a connection each: server CPU µs/connection" CLOSE 2
row "RESP \`INCR\` (redis-benchmark -c 50): requests/s" INCR 1
if [ -n "$REDIS_TLS" ]; then
  r=$(col 1 <<<"${INCR[redis]}" | median)
  echo "| redis-server over TLS, \`INCR\` (the same load): requests/s | | $r | |"
fi
