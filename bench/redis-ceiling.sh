#!/usr/bin/env bash
# The purchase path against the Redis ceiling: redis-benchmark running the purchase
# script itself (EVALSHA, pipelined 16 deep, unique users) beside the data plane's
# purchase path (every request a new user, stock ample, so every request runs the
# script), alternating, several rounds. Reports scripts per second and Redis CPU per
# script (redis-server's own CPU time over the scripts it ran while the load ran), the
# data plane's CPU per purchase, and how many of the machine's cores were busy: where
# the load generator, the node and Redis share the cores, the path's rate is the
# machine's, and the Redis CPU per purchase says what it would be on a Redis of its own.
#
#   bench/redis-ceiling.sh [ROUNDS] [SECONDS] [SHARDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5} shards=${3:-1}
# As many purchases in flight on each side: redis-benchmark's 16 clients with 16 calls
# pipelined each, the simulator's 256 connections (CONNS to change it).
conns=${CONNS:-256}
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
node_pid=$!
pids+=($node_pid)
wait_http "http://127.0.0.1:$dport"
no_limits
# Stock enough for every purchase of the run, in one partition per campaign.
open_campaign rb 50000000 1
# One campaign per round for the data plane: its shoppers are new in every round.
for r in $(seq "$rounds"); do open_campaign "dp$r" 50000000 1; done
sleep 0.5
# The data plane's purchase script, read apart so that a missing file stops the run (set -e).
purchase_lua=$(cargo run -q --release -p seckill-core --example script -- purchase.lua)
sha=$(rcli -p "$rport" SCRIPT LOAD "$purchase_lua")
# redis-benchmark takes a password only on its command line (-a), where none belongs: it
# logs in as a user of its own that needs none (any -a will do), limited to campaign
# rb's keys and, like the nodes' user, to commands outside @dangerous.
rcli -p "$rport" ACL SETUSER seckill-bench on nopass '~sk:{rb.*' +@all -@dangerous >/dev/null

cpu_ticks() { awk '{print $14 + $15}' "/proc/$redis_pid/stat"; }
node_ticks() { awk '{print $14 + $15}' "/proc/$node_pid/stat"; }
# The machine's busy and total ticks, over all its cores.
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
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
# measure CMD...: runs CMD while sampling Redis's, the node's and the machine's CPU time
# and the orders made every 100 ms; prints "orders/s redis_µs_per_order node_µs_per_order
# cores_busy" over the samples where orders were made (so set-up and checks around the
# load do not count).
measure() {
  local samples="$work/samples"
  ( while :; do echo "$(date +%s.%N) $(cpu_ticks) $(orders_made) $(node_ticks) $(machine_ticks)"; sleep 0.1; done ) > "$samples" &
  local sampler=$!
  "$@" >/dev/null 2>&1 || true
  sleep 0.3
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null || true
  python3 - "$samples" "$hz" <<'PY'
import os, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 6]
hz = float(sys.argv[2])
busy = [i for i in range(1, len(rows)) if rows[i][2] - rows[i - 1][2] > 100]
if not busy:
    print("0 0 0 0")
else:
    a, b = rows[busy[0] - 1], rows[busy[-1]]
    orders = b[2] - a[2]
    cores = (b[4] - a[4]) / (b[5] - a[5]) * os.cpu_count()
    print(round(orders / (b[0] - a[0])), (b[1] - a[1]) / hz * 1e6 / orders,
          (b[3] - a[3]) / hz * 1e6 / orders, f"{cores:.2f}")
PY
}
rb_run() {
  measure redis-benchmark -p "$rport" --user seckill-bench -a none \
      -P 16 -c 16 -n $((secs * 60000)) -r 100000000 -q \
      EVALSHA "$sha" 6 "sk:{rb.0}:part" "sk:{rb.0}:buyers" "sk:{rb.0}:holds" "sk:{rb.0}:events" \
      "sk:{rb.0}:once" "sk:{rb.0}:passes" rb 0 "sk:{rb.0}:order:" "u__rand_int__" 1 k "" ""
}
flat_out_scenario "$work/flat-out.toml" "http://127.0.0.1:$dport" "$ops_redis" dp1 "$secs" "$conns"
dp_run() {
  measure $bin/seckill-sim run --scenario "$work/flat-out.toml" --campaign "dp$1"
}
declare -A rate cpu node busy
for round in $(seq "$rounds"); do
  read -r r c n b <<<"$(rb_run)"; rate[rb]+="$r " cpu[rb]+="$c " busy[rb]+="$b "
  read -r r c n b <<<"$(dp_run "$round")"; rate[dp]+="$r " cpu[dp]+="$c " node[dp]+="$n " busy[dp]+="$b "
done
printf 'purchase script: redis-benchmark -P 16 vs the data plane (%s shard(s), fed by seckill-sim, %s connections); %s rounds of %s s, medians\n' "$shards" "$conns" "$rounds" "$secs"
printf '  %-34s %12s %17s %16s %12s\n' "" "purchases/s" "Redis CPU µs each" "node CPU µs each" "cores busy"
mr=$(echo "${rate[rb]}" | median) mc=$(echo "${cpu[rb]}" | median) mb=$(echo "${busy[rb]}" | median)
printf '  %-34s %12s %17.2f %16s %7s of %s   runs: %s\n' "redis-benchmark EVALSHA, pipelined" "$mr" "$mc" "" "$mb" "$(nproc)" "${rate[rb]}"
dr=$(echo "${rate[dp]}" | median) dc=$(echo "${cpu[dp]}" | median) dn=$(echo "${node[dp]}" | median) db=$(echo "${busy[dp]}" | median)
printf '  %-34s %12s %17.2f %16.2f %7s of %s   runs: %s\n' "data plane purchase path" "$dr" "$dc" "$dn" "$db" "$(nproc)" "${rate[dp]}"
printf '  %-34s %12.2f %17.2f\n' "data plane / redis-benchmark" "$(echo "$dr / $mr" | bc -l)" "$(echo "$dc / $mc" | bc -l)"
printf '  %-34s %12.0f   (one core of Redis over its CPU per purchase on the path)\n' \
    "data plane, Redis-bound" "$(echo "1000000 / $dc" | bc -l)"
printf '  (rates and CPU over the samples, every 100 ms, in which orders were made)\n'
