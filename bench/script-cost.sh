#!/usr/bin/env bash
# Redis CPU per successful purchase: the purchase script as it was (one purchase a call,
# bench/baseline/purchase-v1.lua) beside today's, one purchase a call and several
# coalesced into one call, all under redis-benchmark -P 16 -c 16 on one Redis, in turns,
# several rounds. Every purchase is a new shopper with an Idempotency-Key and succeeds
# (ample stock, no limit in the way). CPU is Redis's own (every thread's, from
# /proc/PID/task/*/schedstat) over the run, divided by the orders the run made.
#
#   bench/script-cost.sh [ROUNDS] [PURCHASES]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} total=${2:-40000}
command -v redis-benchmark >/dev/null || { echo "redis-benchmark is missing: apt-get install redis-tools" >&2; exit 1; }
. bench/lib.sh
start_redis
redis_pid=${pids[-1]}
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'; }
rcli -p "$rport" ACL SETUSER seckill-bench on nopass '~sk:{sc*' +@all -@dangerous >/dev/null
v1=$(rcli -p "$rport" SCRIPT LOAD "$(cat bench/baseline/purchase-v1.lua)")
v2=$(rcli -p "$rport" SCRIPT LOAD "$(cargo run -q --release -p seckill-core --example script -- purchase.lua)")
# A partition of ample stock, open, one unit a shopper; as arm_partition.lua leaves it.
partition() {
  rcli -p "$rport" HSET "sk:{$1.0}:part" initial 100000000 stock 100000000 held 0 sold 0 \
      transit 0 inflow 0 seq 0 xseq 0 state live layout 2 limit 1 hold_ttl_ms 600000 \
      starts_at_ms 0 ends_at_ms 0 >/dev/null
}
seq_of() { rcli -p "$rport" HGET "sk:{$1.0}:part" seq; }
# run NAME CALLS ARGS...: redis-benchmark's calls; prints "orders/s µs-per-order".
run() {
  local id=$1 calls=$2; shift 2
  local s0 r0 t0 s1 r1 t1
  s0=$(seq_of "$id") r0=$(cpu_ns "$redis_pid") t0=$(date +%s%N)
  redis-benchmark -p "$rport" --user seckill-bench -a none -P 16 -c 16 -n "$calls" \
      -r 1000000000 -q "$@" >/dev/null 2>&1
  s1=$(seq_of "$id") r1=$(cpu_ns "$redis_pid") t1=$(date +%s%N)
  local made=$((s1 - s0))
  [ "$made" -gt 0 ] || { echo "$id: no orders made" >&2; exit 1; }
  echo "$((made * 1000000000 / (t1 - t0))) $(echo "($r1 - $r0) / 1000 / $made" | bc -l)"
}
v1_call() {
  local t="sk:{sc1.0}"
  run sc1 "$total" EVALSHA "$v1" 5 "$t:part" "$t:buyers" "$t:holds" "$t:events" \
      "$t:idem:u__rand_int__:k" u__rand_int__ 1 sc1 0 "$t:order:" 86400 "" ""
}
# v2_call ID N: N purchases a call, each a shopper of its own.
v2_call() {
  local id=$1 n=$2 t="sk:{$1.0}" args=()
  for _ in $(seq "$n"); do args+=(u__rand_int__ 1 k "" ""); done
  run "$id" $((total / n)) EVALSHA "$v2" 6 "$t:part" "$t:buyers" "$t:holds" "$t:events" \
      "$t:once" "$t:passes" "$id" 0 "$t:order:" "${args[@]}"
}
sizes="1 4 16"
partition sc1
for n in $sizes; do partition "sc2x$n"; done
declare -A rate cpu
for _ in $(seq "$rounds"); do
  read -r r c <<<"$(v1_call)"; rate[v1]+="$r " cpu[v1]+="$c "
  for n in $sizes; do
    read -r r c <<<"$(v2_call "sc2x$n" "$n")"; rate[v2x$n]+="$r " cpu[v2x$n]+="$c "
  done
done
base=$(echo "${cpu[v1]}" | median)
printf 'Redis CPU per successful purchase, redis-benchmark -P 16 -c 16, %s purchases a run, %s rounds, medians\n' "$total" "$rounds"
printf '  %-44s %10s %10s %8s   runs (µs)\n' "script" "orders/s" "µs each" "× v1"
row() {
  local m; m=$(echo "${cpu[$2]}" | median)
  printf '  %-44s %10s %10.2f %8.2f   %s\n' "$1" "$(echo "${rate[$2]}" | median)" "$m" \
      "$(echo "$m / $base" | bc -l)" "$(for x in ${cpu[$2]}; do printf '%.1f ' "$x"; done)"
}
row "v1 (bench/baseline/purchase-v1.lua), 1 a call" v1
for n in $sizes; do row "v2 (purchase.lua), $n a call" "v2x$n"; done
