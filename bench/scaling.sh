#!/usr/bin/env bash
# What grows with the crowd: purchases from 10,000 vs 1,000,000 distinct shoppers (and
# source addresses), and campaigns of 1, 8 and 64 partitions, against one node; the
# rate the node answered, purchase latency, and the node's and Redis's memory after.
#
#   bench/scaling.sh [SECONDS] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10} rate=${2:-12000}
cargo build --release -q -p seckill-dataplane -p seckill-simulator
. bench/lib.sh
start_redis
dport=$(port)
: > "$work/empty.toml"
$bin/seckill-dataplane serve --config "$work/empty.toml" --listen "127.0.0.1:$dport" \
    --admin-listen "" --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards 1 --secret-file "$work/secret" --no-worker 2>"$work/dataplane.log" &
node=$!
pids+=($node)
wait_http "http://127.0.0.1:$dport"
no_limits
rss() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$node/status"; }
redis_mb() { rcli -p "$rport" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ {printf "%.0f", $2 / 1048576}'; }
printf 'one node, 1 shard; %s s at %s purchases/s planned; stock ample (every purchase runs the script)\n' "$secs" "$rate"
printf '%-10s %-11s %-10s %10s %9s %9s %10s %10s\n' users partitions addresses "answered/s" "p50 ms" "p99 ms" "node MB" "redis MB"
printf '%-10s %-11s %-10s %10s %9s %9s %10s %10s\n' "(start)" "" "" "" "" "" "$(rss)" "$(redis_mb)"
n=0
for spec in "10000 8 4096" "1000000 8 65536" "10000 1 4096" "10000 64 4096"; do
  read -r users parts addrs <<<"$spec"
  n=$((n + 1))
  open_campaign "scale$n" 50000000 "$parts"
  sleep 0.5
  cat > "$work/s$n.toml" <<TOML
target = "http://127.0.0.1:$dport"
redis = "$ops_redis"
redis_password_file = "$ops_password_file"
token_key = "$shop_key"
token_issuer = "https://shop.bench"
duration_s = $secs
threads = 1
connections = 256
[campaign]
id = "scale$n"
[arrivals]
profile = "constant"
rate = $rate
[population]
users = $users
addresses = $addrs
[personas]
shopper = 1
TOML
  $bin/seckill-sim run --scenario "$work/s$n.toml" --json "$work/r$n.json" >/dev/null 2>&1 || true
  read -r answered p50 p99 <<<"$(python3 -c "
import json; r = json.load(open('$work/r$n.json')); l = r['purchase_latency']
print(round(r['achieved_per_s']), l['p50_ms'], l['p99_ms'])")"
  printf '%-10s %-11s %-10s %10s %9s %9s %10s %10s\n' "$users" "$parts" "$addrs" "$answered" "$p50" "$p99" "$(rss)" "$(redis_mb)"
done
