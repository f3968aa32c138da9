#!/usr/bin/env bash
# One Redis against a Redis Cluster of 3 masters (each with a replica, as deployed), and
# that cluster with every purchase confirmed by a replica (`wait_replicas = 1`): the
# data plane's purchase path fed flat out by the simulator (unique shoppers, ample stock,
# 8 partitions, so every request runs the purchase script), alternating, several rounds,
# medians. Every Redis writes its append-only file with `appendfsync always`.
#
#   bench/cluster.sh [ROUNDS] [SECONDS] [SHARDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5} shards=${3:-1}
cargo build --release -q -p seckill-dataplane -p seckill-simulator
. bench/lib.sh
start_redis --appendonly yes --appendfsync always
single_node=$node_redis single_ops=$ops_redis
base=$(python3 - <<'PY'
import random, socket
def free(p):
    try:
        s = socket.socket(); s.bind(("127.0.0.1", p)); s.close(); return True
    except OSError:
        return False
while True:
    b = random.randrange(20000, 29000)
    if all(free(b + i) and free(b + i + 10000) for i in range(6)):
        print(b); break
PY
)
# The cluster's files in $work: its users are $work/users, the single Redis's (same
# passwords: scripts/redis-users.sh keeps them), and its stop logs in with them.
scripts/cluster.sh start "$base" "$work" >/dev/null
trap 'scripts/cluster.sh stop "$base" "$work" >/dev/null; cleanup' EXIT
redis_urls "$base"
cluster_node=$node_redis cluster_ops=$ops_redis

# node URL [TOML]: a data plane node on that Redis (a node URL), with that configuration;
# sets nport.
node() {
  local p
  p=$(port)
  nport=$p
  printf '%s\n' "${2:-}" > "$work/node-$p.toml"
  $bin/seckill-dataplane serve --config "$work/node-$p.toml" --listen "127.0.0.1:$p" \
      --admin-listen "" --no-worker --redis "$1" --redis-password-file "$node_password_file" \
      --shards "$shards" --secret-file "$work/secret" 2>>"$work/dataplane.log" &
  pids+=($!)
  wait_http "http://127.0.0.1:$p"
}
node "$single_node"
one_port=$nport
node "$cluster_node"
cluster_port=$nport
node "$cluster_node" $'[redis_client]\nwait_replicas = 1'
durable_port=$nport
for r in "$single_ops" "$cluster_ops"; do
  ops_redis=$r no_limits
  for round in $(seq "$rounds"); do ops_redis=$r open_campaign "c$round" 50000000 8; done
done
sleep 0.5
# flat_out PORT REDIS CAMPAIGN: purchases answered per second (REDIS: an ops URL).
flat_out() {
  flat_out_scenario "$work/flat.toml" "http://127.0.0.1:$1" "$2" "$3" "$secs"
  $bin/seckill-sim run --scenario "$work/flat.toml" --json "$work/r.json" >/dev/null 2>&1 || true
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(round(r["achieved_per_s"]))' "$work/r.json"
}
declare -A runs
for round in $(seq "$rounds"); do
  runs[one]+="$(flat_out "$one_port" "$single_ops" "c$round") "
  runs[cluster]+="$(flat_out "$cluster_port" "$cluster_ops" "c$round") "
  runs[durable]+="$(flat_out "$durable_port" "$cluster_ops" "c$round") "
done
o=$(echo "${runs[one]}" | median) c=$(echo "${runs[cluster]}" | median)
printf 'purchase path, %s shard(s), seckill-sim flat out (64 connections), %s rounds of %s s, median purchases/s\n' "$shards" "$rounds" "$secs"
printf '  %-40s %10s   runs: %s\n' "one Redis" "$o" "${runs[one]}"
printf '  %-40s %10s   runs: %s\n' "Redis Cluster, 3 masters + 3 replicas" "$c" "${runs[cluster]}"
d=$(echo "${runs[durable]}" | median)
printf '  %-40s %10s   runs: %s\n' "the cluster, wait_replicas = 1" "$d" "${runs[durable]}"
printf '  %-40s %10.2f\n' "cluster / one" "$(echo "$c / $o" | bc -l)"
printf '  %-40s %10.2f\n' "cluster with WAIT / cluster" "$(echo "$d / $c" | bc -l)"
