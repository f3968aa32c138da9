#!/usr/bin/env bash
# Where a shard's time goes on a request that ends on the shard: wrk on the sold-out
# purchase while `perf record` samples the data plane (software clock, so it works where
# the CPU's counters are hidden); prints the hottest functions and their share.
#
#   bench/profile.sh [SECONDS] [TOP]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10} top=${2:-25}
for tool in wrk perf; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install wrk linux-perf" >&2; exit 1; }
done
cargo build --release -q -p seckill-dataplane
. bench/lib.sh
start_redis
dport=$(port)
$bin/seckill-dataplane serve --listen "127.0.0.1:$dport" --admin-listen "" \
    --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards 1 --demo-issuer --secret-file "$work/secret" 2>"$work/dataplane.log" &
node=$!
pids+=($node)
wait_http "http://127.0.0.1:$dport"
sold_out_campaign
buy_the_unit "http://127.0.0.1:$dport"
perf record -q -e cpu-clock -F 2999 -p "$node" -o "$work/perf.data" -- sleep "$secs" 2>/dev/null &
recorder=$!
wrk -t1 -c64 -d"${secs}s" -s bench/purchase.lua "http://127.0.0.1:$dport/api/campaigns/bench/purchase" |
  awk '/Requests\/sec/ {print "sold-out purchase, 1 shard: " $2 " requests/s while sampled"}'
wait "$recorder" || true
echo "hottest functions of the data plane (self time, share of its samples):"
perf report -i "$work/perf.data" --no-children --sort symbol --percent-limit 0.8 --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -"$top" | sed -E "s/\[\.\] //; s/\[k\] /kernel: /; s/ +/ /g; s/ - - $//" |
  cut -c1-110
echo "by library:"
perf report -i "$work/perf.data" --no-children --sort dso --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -6 | sed -E 's/ +/ /g'
