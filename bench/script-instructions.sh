#!/usr/bin/env bash
# Redis's work per successful purchase, counted in instructions: the same calls as
# bench/script-cost.sh (the earlier script, bench/baseline/purchase-v1.lua, one purchase
# a call; today's one, 4 and 16 a call), each on a redis-server of its own under
# valgrind's callgrind. A count is repeatable for the same binary and calls whatever
# else the machine does, where CPU time on a shared machine spreads by a third between
# rounds. Each script runs twice, N and 2N orders; the difference over N is what one
# more order costs, without the server's start and stop.
#
#   bench/script-instructions.sh [ORDERS]
set -euo pipefail
cd "$(dirname "$0")/.."
orders=${1:-4096}
for tool in valgrind redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install valgrind redis-tools" >&2; exit 1; }
done
. bench/lib.sh
# The purchase script as Redis runs it: its generated prelude and all.
cargo run -q --release -p seckill-core --example script -- purchase.lua >"$work/purchase.lua"

# count SCRIPT KEYS CALLS ARGS...: instructions redis-server ran for CALLS calls of
# SCRIPT (EVALSHA with KEYS keys and ARGS, pipelined), start to stop, and the orders made.
count() {
  local script=$1 nkeys=$2 calls=$3; shift 3
  local p out sha
  p=$(port) out="$work/cg.$p"
  valgrind --tool=callgrind --callgrind-out-file="$out" redis-server --port "$p" \
      --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >/dev/null 2>&1 &
  local vg=$!
  for _ in $(seq 300); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
  sha=$(redis-cli -p "$p" SCRIPT LOAD "$(cat "$script")")
  # A partition of ample stock, open, one unit a shopper; as arm_partition.lua leaves it.
  redis-cli -p "$p" HSET "sk:{ci.0}:part" initial 100000000 stock 100000000 held 0 sold 0 \
      transit 0 inflow 0 seq 0 xseq 0 state live layout 2 limit 1 hold_ttl_ms 600000 \
      starts_at_ms 0 ends_at_ms 0 >/dev/null
  redis-benchmark -p "$p" -P 16 -c 4 -n "$calls" -r 1000000000 -q \
      EVALSHA "$sha" "$nkeys" "$@" >/dev/null 2>&1
  local made
  made=$(redis-cli -p "$p" HGET "sk:{ci.0}:part" seq || echo 0)
  redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
  wait "$vg" || true
  echo "$(awk '/^summary:/ {print $2; exit}' "$out") $made"
  rm -f "$out"
}
# per_order NAME PER-CALL SCRIPT KEYS ARGS...: instructions one more order costs.
per_order() {
  local name=$1 n=$2; shift 2
  local calls=$((orders / n)) ia oa ib ob
  read -r ia oa <<<"$(count "$1" "$2" "$calls" "${@:3}")"
  read -r ib ob <<<"$(count "$1" "$2" $((2 * calls)) "${@:3}")"
  [ "$ob" -gt "$oa" ] || { echo "$name: no orders made" >&2; exit 1; }
  echo "$name $(( (ib - ia) / (ob - oa) ))"
}
t="sk:{ci.0}"
v1_keys=(5 "$t:part" "$t:buyers" "$t:holds" "$t:events" "$t:idem:u__rand_int__:k")
v2_keys=(6 "$t:part" "$t:buyers" "$t:holds" "$t:events" "$t:once" "$t:passes")
declare -A ir
read -r _ ir[v1] <<<"$(per_order v1 1 bench/baseline/purchase-v1.lua "${v1_keys[@]}" \
    u__rand_int__ 1 ci 0 "$t:order:" 86400 "" "")"
for n in 1 4 16; do
  args=(); for _ in $(seq "$n"); do args+=(u__rand_int__ 1 k "" ""); done
  read -r _ ir[v2x$n] <<<"$(per_order "v2x$n" "$n" "$work/purchase.lua" "${v2_keys[@]}" \
      ci 0 "$t:order:" "${args[@]}")"
done
# A failure inside $(...) does not stop the script: a count that is not a number does.
for k in "${!ir[@]}"; do
  [[ ${ir[$k]} =~ ^[0-9]+$ ]] || { echo "$k: no instruction count" >&2; exit 1; }
done
printf 'Redis instructions per successful purchase (callgrind), redis-benchmark -P 16, %s and %s orders a script\n' "$orders" "$((2 * orders))"
printf '  %-44s %14s %8s\n' "script" "instructions" "× v1"
row() { printf '  %-44s %14s %8.2f\n' "$1" "${ir[$2]}" "$(echo "${ir[$2]} / ${ir[v1]}" | bc -l)"; }
row "v1 (bench/baseline/purchase-v1.lua), 1 a call" v1
for n in 1 4 16; do row "v2 (purchase.lua), $n a call" "v2x$n"; done
