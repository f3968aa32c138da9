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
. bench/callgrind.sh
# The purchase script as Redis runs it: its generated prelude and all.
cargo run -q --release -p seckill-core --example script -- purchase.lua >"$work/purchase.lua"

t=$purchase_tag
v1_keys=(5 "$t:part" "$t:buyers" "$t:holds" "$t:events" "$t:idem:u__rand_int__:k")
declare -A ir
read -r _ ir[v1] <<<"$(per_order v1 "$orders" 1 bench/baseline/purchase-v1.lua "${v1_keys[@]}" \
    u__rand_int__ 1 ci 0 "$t:order:" 86400 "" "")"
for n in 1 4 16; do
  purchase_args "$n"
  read -r _ ir[v2x$n] <<<"$(per_order "v2x$n" "$orders" "$n" "$work/purchase.lua" \
      "${purchase_keys[@]}" "${purchase_argv[@]}")"
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
