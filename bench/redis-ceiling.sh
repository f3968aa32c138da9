#!/usr/bin/env bash
# The purchase path against the Redis ceiling: redis-benchmark running the purchase
# script itself (EVALSHA, pipelined 16 deep, unique users) beside the data plane's
# purchase path (every request a new user, stock ample, so every request runs the
# script), alternating, several rounds. Reports scripts per second and Redis CPU per
# script (redis-server's own CPU time over the scripts it ran while the load ran).
#
#   bench/redis-ceiling.sh [ROUNDS] [SECONDS] [SHARDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5} shards=${3:-1}
command -v redis-benchmark >/dev/null || { echo "redis-benchmark is missing: apt-get install redis-tools" >&2; exit 1; }
cargo build --release -q -p seckill-dataplane -p seckill-simulator
. bench/lib.sh
start_redis
redis_pid=${pids[-1]}
dport=$(port)
: > "$work/empty.toml"
$bin/seckill-dataplane serve --config "$work/empty.toml" --listen "127.0.0.1:$dport" \
    --admin-listen "" --no-worker --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards "$shards" --secret-file "$work/secret" 2>"$work/dataplane.log" &
pids+=($!)
wait_http "http://127.0.0.1:$dport"
no_limits
# Stock enough for every purchase of the run, in one partition per campaign.
open_campaign rb 50000000 1
# One campaign per round for the data plane: its shoppers are new in every round.
for r in $(seq "$rounds"); do open_campaign "dp$r" 50000000 1; done
sleep 0.5
# The data plane's purchase script, read apart so that a missing file stops the run (set -e).
purchase_lua=$(cat core/src/scripts/purchase.lua)
sha=$(rcli -p "$rport" SCRIPT LOAD "$purchase_lua")
# redis-benchmark takes a password only on its command line (-a), where none belongs: it
# logs in as a user of its own that needs none (any -a will do), limited to campaign
# rb's keys and, like the nodes' user, to commands outside @dangerous.
rcli -p "$rport" ACL SETUSER seckill-bench on nopass '~sk:{rb.*' +@all -@dangerous >/dev/null

cpu_ticks() { awk '{print $14 + $15}' "/proc/$redis_pid/stat"; }
# The orders every campaign of the run has made (each partition's seq): the data plane
# carries several purchases in one call when they wait for the partition, so calls are
# not purchases.
order_keys=("sk:{rb.0}:part")
for r in $(seq "$rounds"); do order_keys+=("sk:{dp$r.0}:part"); done
orders_made() {
  rcli -p "$rport" EVAL "local s = 0 for _, k in ipairs(KEYS) do
      s = s + (tonumber(redis.call('HGET', k, 'seq')) or 0) end return s" "${#order_keys[@]}" "${order_keys[@]}"
}
hz=$(getconf CLK_TCK)
# measure CMD...: runs CMD while sampling Redis's CPU time and the orders made every
# 100 ms; prints "orders/s cpu_µs_per_order" over the samples where orders were made (so
# set-up and checks around the load do not count).
measure() {
  local samples="$work/samples"
  ( while :; do echo "$(date +%s.%N) $(cpu_ticks) $(orders_made)"; sleep 0.1; done ) > "$samples" &
  local sampler=$!
  "$@" >/dev/null 2>&1 || true
  sleep 0.3
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null || true
  python3 - "$samples" "$hz" <<'PY'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 3]
hz = float(sys.argv[2])
busy = [i for i in range(1, len(rows)) if rows[i][2] - rows[i - 1][2] > 100]
if not busy:
    print("0 0")
else:
    a, b = rows[busy[0] - 1], rows[busy[-1]]
    calls = b[2] - a[2]
    print(round(calls / (b[0] - a[0])), (b[1] - a[1]) / hz * 1e6 / calls)
PY
}
rb_run() {
  measure redis-benchmark -p "$rport" --user seckill-bench -a none \
      -P 16 -c 16 -n $((secs * 60000)) -r 100000000 -q \
      EVALSHA "$sha" 6 "sk:{rb.0}:part" "sk:{rb.0}:buyers" "sk:{rb.0}:holds" "sk:{rb.0}:events" \
      "sk:{rb.0}:once" "sk:{rb.0}:passes" rb 0 "sk:{rb.0}:order:" "u__rand_int__" 1 k "" ""
}
flat_out_scenario "$work/flat-out.toml" "http://127.0.0.1:$dport" "$ops_redis" dp1 "$secs"
dp_run() {
  measure $bin/seckill-sim run --scenario "$work/flat-out.toml" --campaign "dp$1"
}
declare -A rate cpu
for round in $(seq "$rounds"); do
  read -r r c <<<"$(rb_run)"; rate[rb]+="$r " cpu[rb]+="$c "
  read -r r c <<<"$(dp_run "$round")"; rate[dp]+="$r " cpu[dp]+="$c "
done
printf 'purchase script: redis-benchmark -P 16 vs the data plane (%s shard(s), fed by seckill-sim, 64 connections); %s rounds of %s s, medians\n' "$shards" "$rounds" "$secs"
printf '  %-34s %12s %16s\n' "" "purchases/s" "Redis CPU µs each"
mr=$(echo "${rate[rb]}" | median) mc=$(echo "${cpu[rb]}" | median)
printf '  %-34s %12s %16.2f   runs: %s\n' "redis-benchmark EVALSHA, pipelined" "$mr" "$mc" "${rate[rb]}"
dr=$(echo "${rate[dp]}" | median) dc=$(echo "${cpu[dp]}" | median)
printf '  %-34s %12s %16.2f   runs: %s\n' "data plane purchase path" "$dr" "$dc" "${rate[dp]}"
printf '  %-34s %12.2f %16.2f\n' "data plane / redis-benchmark" "$(echo "$dr / $mr" | bc -l)" "$(echo "$dc / $mc" | bc -l)"
printf '  (rates and CPU over the samples, every 100 ms, in which orders were made)\n'
