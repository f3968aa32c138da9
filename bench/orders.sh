#!/usr/bin/env bash
# The order pipeline: worker throughput into SQLite (a backlog of events drained by one
# worker), and pay-to-delivered latency with the worker running during a surge.
#
#   bench/orders.sh [ORDERS]
set -euo pipefail
cd "$(dirname "$0")/.."
orders=${1:-20000}
cargo build --release -q
# The scratch dir, the secret and a Redis with the managed users (lib.sh).
. bench/lib.sh
start_redis
# Every shopper of the burst comes from 127.0.0.1: the production limits of
# config/dataplane.toml (read by serve without --config) would refuse it.
no_limits
dport=$(port)
campaign() {
  printf 'id="%s"\nname="bench"\ntotal=%s\npartitions=8\nper_user_limit=1\nhold_ttl_s=600\nprice_cents=1\n' "$1" "$orders" > "$work/$1.toml"
  local c=($bin/seckill-dataplane campaign --redis "$ops_redis" --redis-password-file "$ops_password_file")
  "${c[@]}" create --file "$work/$1.toml" >/dev/null
  "${c[@]}" arm "$1" >/dev/null
  "${c[@]}" start "$1" >/dev/null
  sleep 0.6
}
serve() {
  $bin/seckill-dataplane serve --listen "127.0.0.1:$dport" --admin-listen "" \
      --redis "$node_redis" --redis-password-file "$node_password_file" --shards 1 --demo-issuer --demo-payments \
      --secret-file "$work/secret" "$@" 2>>"$work/serve.log" &
  server=$!
  pids+=($server)  # stopped at exit too, should a step fail before its stop
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$dport/api/time" >/dev/null 2>&1 && break; sleep 0.1; done
}
burst() {
  $bin/seckill-sim burst --target "http://127.0.0.1:$dport" \
      --redis "$ops_redis" --redis-password-file "$ops_password_file" --campaign "$1" \
      --users "$orders" --requests "$orders" --concurrency 64 --pay 1 | awk 'NR == 1'
}
drained() {  # campaign store...
  local c=$1; shift
  local args=(); for d in "$@"; do args+=(--db "$d"); done
  $bin/seckill-dataplane reconcile "$c" --redis "$ops_redis" --redis-password-file "$ops_password_file" \
      --json "${args[@]}" 2>/dev/null \
    | python3 -c 'import sys,json; r=json.load(sys.stdin)["report"]; s=r["streams"]; sys.exit(0 if s["pending"]==0 and s["lag"]==0 and not r["missing"] and not r["undelivered"] and not r["mismatched"] else 1)'
}

echo "== worker throughput: $orders orders bought and paid with no worker running, then one worker drains them"
serve --no-worker
campaign backlog
burst backlog
events=$(rcli -p "$rport" eval "local n=0 for i=0,7 do n=n+redis.call('XLEN','sk:{backlog.'..i..'}:events') end return n" 0)
printf '[worker]\nname="solo"\ndb="%s/solo.sqlite"\n' "$work" > "$work/worker.toml"
start=$(date +%s.%N)
$bin/seckill-dataplane worker --config "$work/worker.toml" --redis "$node_redis" \
    --redis-password-file "$node_password_file" --secret-file "$work/secret" 2>"$work/worker.log" &
worker=$!; pids+=($worker)
for _ in $(seq 1200); do drained backlog "$work/solo.sqlite" && break; sleep 0.1; done
end=$(date +%s.%N)
kill -INT $worker; wait $worker 2>/dev/null || true
secs=$(echo "$end - $start" | bc -l)
total=$(rcli -p "$rport" eval "local n=0 for i=0,7 do n=n+redis.call('XLEN','sk:{backlog.'..i..'}:events') end return n" 0)
printf 'drained %s stream entries (%s orders held, paid and delivered; %s delivered events) in %.2f s: %.0f orders/s, %.0f entries/s\n' \
  "$total" "$orders" "$((total - events))" "$secs" "$(echo "$orders / $secs" | bc -l)" "$(echo "$total / $secs" | bc -l)"
kill -INT $server; wait $server 2>/dev/null || true

echo "== pay to delivered during a surge: the worker runs inside serve"
printf '[worker]\nname="inline"\ndb="%s/inline.sqlite"\n' "$work" > "$work/inline.toml"
serve --config "$work/inline.toml"
campaign surge
burst surge
for _ in $(seq 600); do drained surge "$work/inline.sqlite" && break; sleep 0.1; done
kill -INT $server; wait $server 2>/dev/null || true
grep "order worker stopped" "$work/serve.log" | sed 's/.*order worker stopped/worker:/'
