#!/usr/bin/env bash
# A local Redis Cluster: 3 masters and 3 replicas (redis-server processes with
# `cluster-enabled yes`, joined by `redis-cli --cluster create`), for demos and tests.
# Every node writes its append-only file with `appendfsync always`, the durable setting
# (see the README's deployment notes), and has the managed Redis's ACL users
# (scripts/redis-users.sh: passwords in DIR/users/, the default user off); replicas log
# in to their masters as seckill-admin (DIR/users/replication.conf).
#
#   scripts/cluster.sh start [BASE_PORT] [DIR]    # nodes on BASE_PORT..BASE_PORT+5 (default 7000, data/cluster)
#   scripts/cluster.sh stop  [BASE_PORT]
#   scripts/cluster.sh status [BASE_PORT]
#   scripts/cluster.sh node PORT [DIR]           # (re)start one node, as after a crash
set -euo pipefail
cmd=${1:-start} base=${2:-7000} dir=${3:-data/cluster}
ports=$(seq "$base" $((base + 5)))
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
users=$dir/users
# Every redis-cli below logs in as the maintenance user; its password stays out of argv.
case $cmd in start | node) "$(dirname "$0")/redis-users.sh" "$users" ;; esac
if [ -s "$users/admin.password" ]; then
  REDISCLI_AUTH=$(cat "$users/admin.password")
  export REDISCLI_AUTH
fi
rcli() { redis-cli --user seckill-admin "$@"; }
ping() { rcli -p "$1" ping 2>/dev/null | grep -q PONG; }
# node PORT: one cluster node, its files (nodes.conf, the append-only file) in $dir/PORT.
node() {
  mkdir -p "$dir/$1"
  redis-server "$users/replication.conf" --port "$1" --bind 127.0.0.1 --dir "$dir/$1" --daemonize yes \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
    --appendonly yes --appendfsync always --save "" \
    --aclfile "$users/users.acl" \
    --pidfile "$dir/$1/redis.pid" --logfile "$dir/$1/redis.log"
}
# until_nodes N PATTERN COMMAND...: waits (10 s at most) until N nodes' answer to
# COMMAND matches PATTERN.
until_nodes() {
  local want=$1 pattern=$2 n
  shift 2
  for _ in $(seq 100); do
    n=0
    for p in $ports; do
      rcli -p "$p" "$@" | grep -q "$pattern" && n=$((n + 1))
    done
    [ "$n" -ge "$want" ] && return 0
    sleep 0.1
  done
  return 1
}
case $cmd in
node)
  node "$base"
  for _ in $(seq 50); do ping "$base" && break; sleep 0.1; done
  ;;
start)
  if ping "$base"; then echo "a node already answers on $base"; exit 0; fi
  for p in $ports; do node "$p"; done
  for p in $ports; do for _ in $(seq 50); do ping "$p" && break; sleep 0.1; done; done
  if [ "$(rcli -p "$base" cluster info | tr -d '\r' | awk -F: '/cluster_known_nodes/ {print $2}')" -lt 6 ]; then
    rcli --cluster create $(for p in $ports; do printf '127.0.0.1:%s ' "$p"; done) \
      --cluster-replicas 1 --cluster-yes >"$dir/create.log"
  fi
  until_nodes 6 'cluster_state:ok' cluster info ||
    { echo "cluster did not become ready; see $dir/create.log and $dir/*/redis.log" >&2; exit 1; }
  # Every replica in sync with its master, so a write can be confirmed (WAIT) at once.
  until_nodes 3 'master_link_status:up' info replication ||
    { echo "replicas did not catch up with their masters" >&2; exit 1; }
  echo "redis cluster ready: masters and replicas on 127.0.0.1:$base-$((base + 5)) ($dir/)"
  echo "use it with --redis redis://seckill-ops@127.0.0.1:$base --redis-password-file $users/ops.password"
  ;;
stop)
  for p in $ports; do rcli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  echo "redis cluster on $base-$((base + 5)) stopped"
  ;;
status)
  rcli -p "$base" cluster nodes | awk '{print $2, $3}' | sed 's/@[0-9]*//' | sort
  ;;
*) echo "usage: $0 start|stop|status|node [PORT] [DIR]" >&2; exit 2 ;;
esac
