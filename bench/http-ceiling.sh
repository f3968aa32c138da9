#!/usr/bin/env bash
# Requests that end on the shard, beside the HTTP ceiling of this machine: nginx
# `return 200` with as many workers as the data plane has shards, the same wrk settings,
# alternating, several rounds; prints the medians and the ratios. With one shard, the
# floors of the stack are measured too (dataplane/examples/http_floor.rs): a glommio
# executor placed as a shard that answers a fixed body without an HTTP library, and
# the same with hyper; what they reach bounds what any route can.
#
#   bench/http-ceiling.sh [SHARDS] [ROUNDS] [SECONDS]
#   SERVE_ARGS="--no-pin" bench/http-ceiling.sh 2    # extra flags for the data plane
#   BASELINE=path/to/an/older/seckill-dataplane bench/http-ceiling.sh   # measured beside
#   (a build that logs in to Redis with --redis-password-file, as every node here does)
set -euo pipefail
cd "$(dirname "$0")/.."
shards=${1:-1} rounds=${2:-3} secs=${3:-5}
conns=64 threads=1
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx is missing: apt-get install nginx-light" >&2; exit 1; }
cargo build --release -q -p seckill-dataplane
[ "$shards" != 1 ] || cargo build --release -q -p seckill-dataplane --example http_floor
. bench/lib.sh
start_redis
start_nginx "$shards"
dport=$(port)
$bin/seckill-dataplane serve --listen "127.0.0.1:$dport" --admin-listen "" \
    --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards "$shards" --demo-issuer --secret-file "$work/secret" ${SERVE_ARGS:-} 2>"$work/dataplane.log" &
pids+=($!)
wait_http "http://127.0.0.1:$dport"
sold_out_campaign
upcoming_campaign
buy_the_unit "http://127.0.0.1:$dport"
nodes=("$dport")
floors=()
if [ "$shards" = 1 ]; then
  for mode in raw hyper; do
    fport=$(port)
    $bin/examples/http_floor "127.0.0.1:$fport" "$mode" 2>"$work/floor-$mode.log" &
    pids+=($!)
    wait_http "http://127.0.0.1:$fport"
    floors+=("$mode:$fport")
  done
fi
if [ -n "${BASELINE:-}" ]; then
  bport=$(port)
  "$BASELINE" serve --listen "127.0.0.1:$bport" --admin-listen "" \
      --redis "$node_redis" --redis-password-file "$node_password_file" \
      --shards "$shards" --demo-issuer --secret-file "$work/secret" ${SERVE_ARGS:-} 2>"$work/baseline.log" &
  pids+=($!)
  wait_http "http://127.0.0.1:$bport"
  nodes+=("$bport")
fi
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $SECKILL_TOKEN")
[ "$code" = 409 ] || { echo "expected 409 sold_out, got $code" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/later/purchase" -H "Authorization: Bearer $SECKILL_TOKEN" -d '{"quantity": 1}')
[ "$code" = 425 ] || { echo "expected 425 not_started, got $code" >&2; exit 1; }

limits() {
  $bin/seckill-dataplane limits --redis "$ops_redis" --redis-password-file "$ops_password_file" set "$@" >/dev/null
  sleep 0.5
}
rate() { wrk -t$threads -c$conns -d${secs}s "$@" 2>/dev/null | awk '/Requests\/sec/ {print $2}'; }
declare -A runs
for r in $(seq "$rounds"); do
  runs[nginx]+="$(rate "http://127.0.0.1:$nport/") "
  for f in "${floors[@]}"; do
    runs[floor_${f%%:*}]+="$(rate "http://127.0.0.1:${f#*:}/api/time") "
    runs[floor_${f%%:*}_post]+="$(rate -s bench/purchase.lua "http://127.0.0.1:${f#*:}/api/campaigns/bench/purchase") "
  done
  for p in "${nodes[@]}"; do
    b=$([ "$p" = "$dport" ] || echo _baseline)
    runs[time$b]+="$(rate "http://127.0.0.1:$p/api/time") "
    runs[soldout$b]+="$(rate -s bench/purchase.lua "http://127.0.0.1:$p/api/campaigns/bench/purchase") "
    runs[early$b]+="$(rate -s bench/purchase.lua "http://127.0.0.1:$p/api/campaigns/later/purchase") "
  done
  limits user_rate=1 user_burst=1
  for p in "${nodes[@]}"; do
    b=$([ "$p" = "$dport" ] || echo _baseline)
    runs[limited$b]+="$(rate -s bench/purchase.lua "http://127.0.0.1:$p/api/campaigns/bench/purchase") "
  done
  limits user_rate=0
done
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $SECKILL_TOKEN")
[ "$code" = 409 ] || { echo "expected 409 sold_out after the runs, got $code" >&2; exit 1; }
n=$(echo "${runs[nginx]}" | median)
printf '%s shard(s), wrk -t%s -c%s -d%ss, %s rounds, median requests/s\n' "$shards" "$threads" "$conns" "$secs" "$rounds"
printf '%-36s %12s %8s   runs: %s\n' "nginx return 200" "$n" "1.00" "${runs[nginx]}"
keys="time soldout limited early"
[ "$shards" != 1 ] || keys="floor_raw floor_raw_post floor_hyper floor_hyper_post $keys"
[ -z "${BASELINE:-}" ] || keys="$keys time_baseline soldout_baseline limited_baseline early_baseline"
for k in $keys; do
  m=$(echo "${runs[$k]}" | median)
  case $k in
    floor_raw) label="floor: glommio, no HTTP library" ;;
    floor_raw_post) label="floor: the same, a purchase's POST" ;;
    floor_hyper) label="floor: glommio and hyper" ;;
    floor_hyper_post) label="floor: the same, a purchase's POST" ;;
    time) label="GET /api/time" ;;
    soldout) label="purchase, sold out (ends on shard)" ;;
    limited) label="purchase, rate limited (429)" ;;
    early) label="purchase, not started (425)" ;;
    time_baseline) label="baseline: GET /api/time" ;;
    soldout_baseline) label="baseline: purchase, sold out" ;;
    limited_baseline) label="baseline: purchase, rate limited" ;;
    early_baseline) label="baseline: purchase, not started" ;;
  esac
  printf '%-36s %12s %8.2f   runs: %s\n' "$label" "$m" "$(echo "$m / $n" | bc -l)" "${runs[$k]}"
done
