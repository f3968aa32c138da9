#!/usr/bin/env bash
# Requests that end on the shard, beside the HTTP ceiling of this machine: nginx
# `return 200` with as many workers as the data plane has shards, the same wrk settings,
# alternating, several rounds; prints the medians and the ratios. With one shard, the
# floors of the stack are measured too (dataplane/examples/http_floor.rs): a glommio
# executor placed as a shard that answers a fixed body without an HTTP library, and
# the same with hyper; what they reach bounds what any route can. Beside each rate, the
# server's CPU a request (user and system, its threads and child processes, from /proc):
# on a machine shared with wrk, cost per request moves less from round to round than rate.
# Last, a sold-out purchase that carries an Idempotency-Key (as the shop's page and the
# simulator's shoppers send every purchase): a key with no first answer ends on the shard
# while the shard holds its partition's lease, and that is what it measures.
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
nginx_pid=${pids[-1]}
dport=$(port)
$bin/seckill-dataplane serve --listen "127.0.0.1:$dport" --admin-listen "" \
    --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards "$shards" --demo-issuer --demo-payments --secret-file "$work/secret" ${SERVE_ARGS:-} 2>"$work/dataplane.log" &
pids+=($!)
declare -A server=([$dport]=$!)
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
    server[$fport]=$!
    wait_http "http://127.0.0.1:$fport"
    floors+=("$mode:$fport")
  done
fi
if [ -n "${BASELINE:-}" ]; then
  bport=$(port)
  # The production configuration, less the sections an older build may not know.
  awk '/^\[identity\]/ {skip = 1; next} /^\[/ {skip = 0} !skip' config/dataplane.toml > "$work/baseline.toml"
  "$BASELINE" serve --config "$work/baseline.toml" --listen "127.0.0.1:$bport" --admin-listen "" \
      --redis "$node_redis" --redis-password-file "$node_password_file" \
      --shards "$shards" --demo-issuer --demo-payments --secret-file "$work/secret" ${SERVE_ARGS:-} 2>"$work/baseline.log" &
  pids+=($!)
  server[$bport]=$!
  wait_http "http://127.0.0.1:$bport"
  nodes+=("$bport")
fi
# Each node's shopper, from its own demo issuer (an older build's tokens may be of another
# kind).
declare -A tokens
for p in "${nodes[@]}"; do tokens[$p]=$(token "http://127.0.0.1:$p" crowd); done
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $SECKILL_TOKEN")
[ "$code" = 409 ] || { echo "expected 409 sold_out, got $code" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/later/purchase" -H "Authorization: Bearer $SECKILL_TOKEN" -d '{"quantity": 1}')
[ "$code" = 425 ] || { echo "expected 425 not_started, got $code" >&2; exit 1; }

hz=$(getconf CLK_TCK)
declare -A runs cpus
# measure KEY PID URL [WRK FLAGS]: one wrk run; its rate to runs[KEY], and the CPU a
# request, in µs, of the server PID to cpus[KEY].
measure() {
  local key=$1 pid=$2 t0 t1 out n
  shift 2
  t0=$(cpu_ticks "$pid")
  out=$(wrk -t$threads -c$conns -d${secs}s "$@" 2>/dev/null)
  t1=$(cpu_ticks "$pid")
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  runs[$key]+="$(awk '/Requests\/sec/ {print $2}' <<<"$out") "
  cpus[$key]+="$(echo "($t1 - $t0) * 1000000 / $hz / ${n:-1}" | bc -l | xargs printf '%.2f') "
}
for r in $(seq "$rounds"); do
  measure nginx "$nginx_pid" "http://127.0.0.1:$nport/"
  for f in "${floors[@]}"; do
    fp=${f#*:}
    measure "floor_${f%%:*}" "${server[$fp]}" "http://127.0.0.1:$fp/api/time"
    measure "floor_${f%%:*}_post" "${server[$fp]}" -s bench/purchase.lua "http://127.0.0.1:$fp/api/campaigns/bench/purchase"
  done
  for p in "${nodes[@]}"; do
    b=$([ "$p" = "$dport" ] || echo _baseline)
    export SECKILL_TOKEN=${tokens[$p]}
    measure "time$b" "${server[$p]}" "http://127.0.0.1:$p/api/time"
    measure "soldout$b" "${server[$p]}" -s bench/purchase.lua "http://127.0.0.1:$p/api/campaigns/bench/purchase"
    measure "early$b" "${server[$p]}" -s bench/purchase.lua "http://127.0.0.1:$p/api/campaigns/later/purchase"
    SECKILL_IDEMPOTENCY_KEY="round-$r" measure "keyed$b" "${server[$p]}" -s bench/purchase.lua "http://127.0.0.1:$p/api/campaigns/bench/purchase"
  done
  limits user_rate=1 user_burst=1
  for p in "${nodes[@]}"; do
    b=$([ "$p" = "$dport" ] || echo _baseline)
    export SECKILL_TOKEN=${tokens[$p]}
    measure "limited$b" "${server[$p]}" -s bench/purchase.lua "http://127.0.0.1:$p/api/campaigns/bench/purchase"
  done
  limits user_rate=0
done
SECKILL_TOKEN=${tokens[$dport]}
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $SECKILL_TOKEN")
[ "$code" = 409 ] || { echo "expected 409 sold_out after the runs, got $code" >&2; exit 1; }
n=$(echo "${runs[nginx]}" | median)
printf '%s shard(s), wrk -t%s -c%s -d%ss, %s rounds, medians; the server'"'"'s CPU in µs a request\n' "$shards" "$threads" "$conns" "$secs" "$rounds"
printf '%-36s %12s %8s %9s   runs: %s\n' "" "requests/s" "/ nginx" "CPU µs" ""
row() { # LABEL KEY
  local m c
  m=$(echo "${runs[$2]}" | median)
  c=$(echo "${cpus[$2]}" | median)
  printf '%-36s %12s %8.2f %8s   runs: %s   CPU: %s\n' "$1" "$m" "$(echo "$m / $n" | bc -l)" "$c" "${runs[$2]}" "${cpus[$2]}"
}
row "nginx return 200" nginx
keys="time soldout limited early keyed"
[ "$shards" != 1 ] || keys="floor_raw floor_raw_post floor_hyper floor_hyper_post $keys"
[ -z "${BASELINE:-}" ] || keys="$keys time_baseline soldout_baseline limited_baseline early_baseline keyed_baseline"
for k in $keys; do
  case $k in
    floor_raw) label="floor: glommio, no HTTP library" ;;
    floor_raw_post) label="floor: the same, a purchase's POST" ;;
    floor_hyper) label="floor: glommio and hyper" ;;
    floor_hyper_post) label="floor: the same, a purchase's POST" ;;
    time) label="GET /api/time" ;;
    soldout) label="purchase, sold out (ends on shard)" ;;
    limited) label="purchase, rate limited (429)" ;;
    early) label="purchase, not started (425)" ;;
    keyed) label="sold out, with Idempotency-Key" ;;
    time_baseline) label="baseline: GET /api/time" ;;
    soldout_baseline) label="baseline: purchase, sold out" ;;
    limited_baseline) label="baseline: purchase, rate limited" ;;
    early_baseline) label="baseline: purchase, not started" ;;
    keyed_baseline) label="baseline: sold out, with a key" ;;
  esac
  row "$label" "$k"
done
