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
. bench/lib.sh
start_redis
dport=$(port)
$bin/seckill-dataplane serve --listen "127.0.0.1:$dport" --admin-listen "" \
    --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards 1 --demo-issuer --demo-payments --secret-file "$work/secret" 2>"$work/dataplane.log" &
pids+=($!)
wait_http "http://127.0.0.1:$dport"
command -v nginx >/dev/null && start_nginx 1
sold_out_campaign
buy_the_unit "http://127.0.0.1:$dport"
export SECKILL_IDEMPOTENCY_KEY=bench-retry

wrk_rate() {
  wrk -t1 -c"$conns" -d"${secs}s" -s bench/purchase.lua "$1/api/campaigns/bench/purchase" 2>/dev/null |
    awk '/Requests\/sec/ {printf "%.0f", $2}'
}
# One shopper (one source address, as wrk has) planned far above what the server
# answers, so the simulator sends as fast as its connections let it.
cat > "$work/flat-out.toml" <<TOML
target = "http://127.0.0.1:1"
redis = "$ops_redis"
redis_password_file = "$ops_password_file"
token_key = "$shop_key"
token_issuer = "https://shop.bench"
duration_s = $secs
threads = 1
connections = $conns
[campaign]
id = "bench"
[arrivals]
profile = "constant"
rate = 250000
[population]
users = 1
[personas]
shopper = 1
TOML
sim_rate() {
  { $bin/seckill-sim run --scenario "$work/flat-out.toml" --target "$1" --json - 2>/dev/null || true; } |
    python3 -c 'import sys,json; print(round(json.load(sys.stdin)["achieved_per_s"]))'
}
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
