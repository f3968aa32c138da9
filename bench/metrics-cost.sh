#!/usr/bin/env bash
# What metrics cost on the hot path: wrk on a sold-out purchase (it ends on the shard,
# so the counting is a visible share of the work) with nobody scraping, with /metrics
# scraped every second, and every 100 ms; alternating, several rounds, medians. With
# BASELINE=path/to/an/older/seckill-dataplane, that binary is measured in the same run
# (a build that logs in to Redis with --redis-password-file, as every node here does).
#
#   bench/metrics-cost.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
cargo build --release -q -p seckill-dataplane
. bench/lib.sh
start_redis
sold_out_campaign

# start BINARY: a node on fresh ports; sets dport, aport, node.
start() {
  dport=$(port) aport=$(port)
  local admin=(--admin-listen "127.0.0.1:$aport")
  "$1" serve --help | grep -q admin-listen || admin=()
  : > "$work/empty.toml"
  "$1" serve --config "$work/empty.toml" --listen "127.0.0.1:$dport" "${admin[@]}" \
      --redis "$node_redis" --redis-password-file "$node_password_file" --shards 1 \
      --demo-issuer --demo-payments --secret-file "$work/secret" 2>>"$work/serve.log" &
  node=$!
  wait_http "http://127.0.0.1:$dport"
  buy_the_unit "http://127.0.0.1:$dport"
}
stop() { kill "$node" 2>/dev/null || true; wait "$node" 2>/dev/null || true; }
rate() {
  wrk -t1 -c64 -d"${secs}s" -s bench/purchase.lua "http://127.0.0.1:$dport/api/campaigns/bench/purchase" 2>/dev/null |
    awk '/Requests\/sec/ {printf "%.0f", $2}'
}
# rate while /metrics is scraped every $1 seconds
scraped() {
  ( while true; do curl -s -o /dev/null "http://127.0.0.1:$aport/metrics"; sleep "$1"; done ) &
  local scraper=$!
  rate
  kill $scraper 2>/dev/null; wait $scraper 2>/dev/null || true
}
declare -A runs
for _ in $(seq "$rounds"); do
  start $bin/seckill-dataplane
  runs[none]+="$(rate) "
  runs[1s]+="$(scraped 1) "
  runs[100ms]+="$(scraped 0.1) "
  stop
  if [ -n "${BASELINE:-}" ]; then
    start "$BASELINE"
    runs[baseline]+="$(rate) "
    stop
  fi
done
base=$(echo "${runs[none]}" | median)
printf 'sold-out purchase, 1 shard, wrk -t1 -c64 -d%ss, %s rounds, median requests/s\n' "$secs" "$rounds"
for k in none 1s 100ms baseline; do
  [ -n "${runs[$k]:-}" ] || continue
  case $k in
    none) label="metrics on, nobody scraping" ;;
    1s) label="scraped every second" ;;
    100ms) label="scraped every 100 ms" ;;
    baseline) label="baseline binary ($BASELINE)" ;;
  esac
  m=$(echo "${runs[$k]}" | median)
  printf '%-44s %9s %6.2f   runs: %s\n' "$label" "$m" "$(echo "$m / $base" | bc -l)" "${runs[$k]}"
done
