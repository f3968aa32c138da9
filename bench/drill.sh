#!/usr/bin/env bash
# Fault drills: a launch with bots (the simulator) against a real local stack (Redis with
# its append-only file fsynced on every write, a data plane node, a separate order
# worker) while a fault is injected; then the pipeline drains and the campaign is
# reconciled. One verdict line per drill, a table at the end; exits non-zero when any
# drill broke a promise.
#
#   bench/drill.sh [RATE]
#
# Verdict columns: acknowledged purchases lost (more units answered 200 than orders in
# Redis), oversell, per-user limit breaches, duplicate deliveries, orders missing from the
# store, units stranded after the drain (holds past their deadline, transfers in flight),
# and the time from the fault's end (the process restarted) until the node is ready
# again (`/readyz`: every shard has Redis and the control plane); and the run's purchase
# p99 (from the planned send), which shows whether refusals stayed fast.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1500}
cargo build --release -q -p seckill-dataplane -p seckill-simulator
. bench/lib.sh
bin=target/release
rport=$(port) dport=$(port) aport=$(port)
redis="redis://127.0.0.1:$rport"
mkdir -p "$work/redis" "$work/content"
head -c 65536 /dev/urandom > "$work/content/midnight-sessions.zip"
sed -e 's/^hold_ttl_s = .*/hold_ttl_s = 8/' config/campaigns/demo.toml > "$work/campaign.toml"
redis_up() {
  redis-server --port "$rport" --bind 127.0.0.1 --dir "$work/redis" --appendonly yes \
      --appendfsync always --save "" --enable-debug-command local >>"$work/redis.log" 2>&1 &
  redis_pid=$!
  pids+=($redis_pid)
  for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
}
node_up() {
  cat > "$work/dp.toml" <<TOML
content_dir = "$work/content"
[admin]
listen = "127.0.0.1:$aport"
[worker]
enabled = false
[limits]
ip_rate = 50
ip_burst = 100
TOML
  $bin/seckill-dataplane serve --config "$work/dp.toml" --listen "127.0.0.1:$dport" --redis "$redis" \
      --shards 2 --secret-file "$work/secret" 2>>"$work/dataplane.log" &
  node_pid=$!
  pids+=($node_pid)
  wait_http "http://127.0.0.1:$dport"
}
worker_up() {
  $bin/seckill-dataplane worker --redis "$redis" --secret-file "$work/secret" --name drill \
      --db "$work/orders.sqlite" 2>>"$work/worker.log" &
  worker_pid=$!
  pids+=($worker_pid)
}
redis_up
node_up
worker_up

# Faults: each runs while the launch is on, and returns when the stack is whole again.
fault_none() { :; }
fault_dataplane() {
  for _ in 1 2 3; do
    sleep 1.5
    kill -9 "$node_pid"; wait "$node_pid" 2>/dev/null || true
    node_up
  done
}
fault_worker() {
  sleep 2
  kill -9 "$worker_pid"; wait "$worker_pid" 2>/dev/null || true
  sleep 1
  worker_up
}
fault_redis_slow() {
  sleep 2
  # Redis answers nothing for 10 s: the breaker opens and purchases are refused at once.
  redis-cli -p "$rport" DEBUG SLEEP 10 >/dev/null
}
fault_redis() {
  sleep 2
  kill -STOP "$redis_pid"; kill -9 "$redis_pid"; wait "$redis_pid" 2>/dev/null || true
  sleep 5
  redis_up
}

rows=()
failed=0
drill() {
  local name=$1 fault=$2
  echo "== drill: $name" >&2
  $bin/seckill-sim run --scenario config/scenarios/launch.toml --target "http://127.0.0.1:$dport" \
      --redis "$redis" --secret-file "$work/secret" --create "$work/campaign.toml" \
      --store "$work/orders.sqlite" --rate "$rate" --duration-s 12 --p99-ms 100000 \
      --fail-on "oversell==0" --json "$work/report.json" > "$work/sim.txt" 2>&1 &
  local sim=$!
  sleep 2.5
  "$fault"
  local ended recovered
  ended=$(date +%s.%N)
  for _ in $(seq 300); do
    code=$(curl -s -o /dev/null -m 1 -w '%{http_code}' "http://127.0.0.1:$aport/readyz" || true)
    [ "$code" = 200 ] && break
    sleep 0.05
  done
  recovered=$(date +%s.%N)
  wait "$sim" || true
  local id
  id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["campaign"])' "$work/report.json" 2>/dev/null || echo "")
  if [ -z "$id" ]; then
    rows+=("$(printf '%-22s %s' "$name" "no report: $(tail -3 "$work/sim.txt" | tr '\n' ' ')")")
    failed=$((failed + 1)); return
  fi
  # Drain: holds expire after 8 s and the worker catches up.
  for _ in $(seq 60); do
    $bin/seckill-dataplane reconcile --redis "$redis" "$id" --db "$work/orders.sqlite" --json > "$work/rec.json" 2>/dev/null || true
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["report"]
s = r["streams"]
sys.exit(0 if not r["overdue_holds"] and s.get("pending", 0) == 0 and s.get("unread", 0) == 0 else 1)' "$work/rec.json" 2>/dev/null && break
    sleep 1
  done
  local row
  row=$(python3 - "$work/report.json" "$work/rec.json" "$name" "$ended" "$recovered" <<'PY'
import json, sys
r, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["report"]
name, ended, recovered = sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
l = c["ledger"]
acked = r["units_to_people"] + r["units_to_bots"]
# Every order ever acknowledged is still in Redis, whatever became of it since (paid,
# delivered, expired after its hold).
lost = max(0, acked - sum(c["orders_in_redis"].values()))
oversell = max(0, l["held"] + l["sold"] + l["remaining"] + l["in_transit"] - l["total"]) + max(0, l["held"] + l["sold"] - l["total"])
limit = sum(1 for v in c["violations"] if "limit" in v)
twice = len(c["delivered_twice"])
missing = len(c["missing"])
stranded = len(c["overdue_holds"]) + len(c["orphaned_holds"]) + l["in_transit"]
bad = lost or oversell or limit or twice or missing or stranded or c["violations"]
p99 = r["purchase_latency"]["p99_ms"]
print(f"{name:<22} {lost:>5} {oversell:>8} {limit:>6} {twice:>6} {missing:>7} {stranded:>8} {recovered - ended:>9.2f} s {p99:>9.1f} ms  {'ok' if not bad else 'FAILED: ' + '; '.join(c['violations'])}")
PY
)
  echo "$row" >&2
  rows+=("$row")
  case $row in *FAILED*) failed=$((failed + 1)) ;; esac
}

drill "no fault (reference)" fault_none
drill "data plane SIGKILL x3" fault_dataplane
drill "worker SIGKILL" fault_worker
drill "redis down 5 s" fault_redis
drill "redis hung 10 s" fault_redis_slow

printf '%-22s %5s %8s %6s %6s %7s %8s %11s %12s\n' drill lost oversell limit twice missing stranded recovered "purchase p99"
for r in "${rows[@]}"; do echo "$r"; done
[ "$failed" = 0 ] || { echo "$failed drill(s) failed" >&2; exit 1; }
