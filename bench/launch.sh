#!/usr/bin/env bash
# End to end: the simulator's launch scenario against a fresh node (its worker and
# order store included), with the Redis CPU it cost per purchase request; the report,
# and its plot to bench/launch.svg.
#
#   bench/launch.sh [SHARDS] [RATE]
set -euo pipefail
cd "$(dirname "$0")/.."
shards=${1:-1} rate=${2:-4000}
cargo build --release -q -p seckill-dataplane -p seckill-simulator
. bench/lib.sh
start_redis
redis_pid=${pids[-1]}
dport=$(port)
cat > "$work/dp.toml" <<TOML
content_dir = "data/content"
[admin]
listen = ""
[worker]
db = "$work/orders.sqlite"
[limits]
ip_rate = 50
ip_burst = 100
TOML
target/release/seckill-dataplane serve --config "$work/dp.toml" --listen "127.0.0.1:$dport" \
    --redis "$redis" --shards "$shards" --secret-file "$work/secret" 2>"$work/dataplane.log" &
pids+=($!)
wait_http "http://127.0.0.1:$dport"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$redis_pid/stat"; }
t0=$(cpu_ticks)
target/release/seckill-sim run --scenario config/scenarios/launch.toml --target "http://127.0.0.1:$dport" \
    --redis "$redis" --secret-file "$work/secret" --store "$work/orders.sqlite" --rate "$rate" \
    --json "$work/report.json" --plot bench/launch.svg > "$work/summary.txt" || true
t1=$(cpu_ticks)
cat "$work/summary.txt"
python3 - "$work/report.json" "$t0" "$t1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t0, t1, hz = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
n = r["requests_by_route"]["purchase"]
print(f"redis CPU: {(t1 - t0) / hz:.2f} s over the run, {(t1 - t0) * 1e6 / hz / max(n, 1):.1f} µs per purchase request ({n} purchases, {r['requests']} requests in all)")
PY
