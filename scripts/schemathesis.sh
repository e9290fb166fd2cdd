#!/usr/bin/env bash
# Property-based API testing: runs schemathesis (PyPI) against seqd's own
# /openapi.json, every check, with a fixed seed so a run is reproducible.
#   scripts/schemathesis.sh [max-examples]     (default 50 per operation)
# Installs schemathesis with pip if missing. Starts seqd (debug build) on a
# temporary SQLite file on 127.0.0.1 with an admin token, and stops it after.
set -euo pipefail
cd "$(dirname "$0")/.."
examples="${1:-50}"

command -v st >/dev/null 2>&1 || python3 -m pip install --quiet "schemathesis==4.32.5"
ST="$(command -v st || echo "python3 -m schemathesis.cli")"

cargo build --quiet --bin seqd
dir="$(mktemp -d)"
port=$(( 20000 + RANDOM % 20000 ))
token="schemathesis-$RANDOM"
./target/debug/seqd serve --database-url "sqlite://$dir/st.db?mode=rwc" --listen "127.0.0.1:$port" \
  --admin-token "$token" >"$dir/seqd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir" || true' EXIT
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS -X POST "http://127.0.0.1:$port/v1/sequences" -H "authorization: Bearer $token" \
  -H 'content-type: application/json' -d '{"name":"order"}' >/dev/null

$ST run "http://127.0.0.1:$port/openapi.json" --checks all --max-examples "$examples" \
  --seed 1 -H "Authorization: Bearer $token"
