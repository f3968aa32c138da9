#!/usr/bin/env bash
# The simulator's offered rate beside wrk's, against the same endpoint with the same
# connections, alternating, several rounds; prints each run, the medians and their
# ratio. Below 0.8, the simulator would be the bottleneck of its own measurements.
# Two endpoints: a purchase on a sold-out campaign, sent as a shopper sends it (with an
# Idempotency-Key, so the data plane looks up the first answer in Redis), and nginx
# `return 200` (when nginx is installed), the fastest server this machine has, where
# only the load generators' own speed counts.
#
#   bench/sim-vs-wrk.sh [ROUNDS] [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5} conns=${3:-64}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
cargo build --release -q -p seckill-dataplane -p seckill-simulator
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

rport=$(port) dport=$(port)
redis="redis://127.0.0.1:$rport"
nport=$(port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >/dev/null &
pids+=($!)
head -c 32 /dev/urandom | base64 > "$work/secret"
for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
target/release/seckill-dataplane serve --listen "127.0.0.1:$dport" --admin-listen "" --redis "$redis" \
    --shards 1 --demo-issuer --secret-file "$work/secret" 2>"$work/dataplane.log" &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$dport/api/time" >/dev/null && break; sleep 0.1; done
if command -v nginx >/dev/null; then
  cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$nport reuseport; location / { return 200; } }
}
NGINX
  nginx -c "$work/nginx.conf" -p "$work" &
  pids+=($!)
fi

# A campaign with one unit, bought, so every purchase after it ends on the shard.
cat > "$work/c.toml" <<TOML
id = "bench"
name = "bench"
total = 1
partitions = 1
per_user_limit = 1
hold_ttl_s = 300
price_cents = 1
TOML
cli() { target/release/seckill-dataplane campaign --redis "$redis" "$@" >/dev/null; }
cli create --file "$work/c.toml"; cli arm bench; cli start bench
target/release/seckill-dataplane limits --redis "$redis" set ip_rate=0 user_rate=0 auto_block_refusals=0 >/dev/null
sleep 0.5
token() { curl -s -XPOST "http://127.0.0.1:$dport/api/session" -d "{\"user_id\":\"$1\"}" | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])'; }
first=$(token first)
curl -s -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $first" >/dev/null
export SECKILL_TOKEN=$(token crowd) SECKILL_IDEMPOTENCY_KEY=bench-retry
sleep 0.6

wrk_rate() {
  wrk -t1 -c"$conns" -d"${secs}s" -s bench/purchase.lua "$1/api/campaigns/bench/purchase" 2>/dev/null |
    awk '/Requests\/sec/ {printf "%.0f", $2}'
}
# One shopper (one source address, as wrk has) planned far above what the server
# answers, so the simulator sends as fast as its connections let it.
sim_rate() {
  target/release/seckill-sim run --scenario config/scenarios/launch.toml \
      --target "$1" --redis "$redis" --secret-file "$work/secret" \
      --campaign bench --starts-in-s 0 --duration-s "$secs" --threads 1 --connections "$conns" \
      --profile constant --rate 250000 --users 1 --pay-fraction 0 --retry-fraction 0 \
      --shopper 1 --hammer 0 --ip-rotator 0 --forger 0 --replayer 0 --skipper 0 --sybil 0 \
      --fail-on "" --p99-ms 1000000 --json - 2>/dev/null |
    python3 -c 'import sys,json; print(round(json.load(sys.stdin)["achieved_per_s"]))'
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
compare() {
  local label=$1 url=$2 w="" s=""
  for _ in $(seq "$rounds"); do
    w+="$(wrk_rate "$url") "
    s+="$(sim_rate "$url") "
  done
  local mw ms
  mw=$(echo "$w" | median) ms=$(echo "$s" | median)
  printf '%s\n' "$label"
  printf '  %-12s %10s   runs: %s\n' "wrk" "$mw" "$w"
  printf '  %-12s %10s   runs: %s\n' "seckill-sim" "$ms" "$s"
  printf '  %-12s %10.2f\n' "sim/wrk" "$(echo "$ms / $mw" | bc -l)"
}
printf '1 load thread each, %s connections, %ss runs, %s rounds, median requests/s\n' "$conns" "$secs" "$rounds"
compare "sold-out purchase with an Idempotency-Key, data plane on 1 shard" "http://127.0.0.1:$dport"
if command -v nginx >/dev/null; then
  compare "nginx return 200, 1 worker" "http://127.0.0.1:$nport"
fi
