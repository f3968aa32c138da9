#!/usr/bin/env bash
# Requests that end on the shard, beside the HTTP ceiling of this machine: nginx
# `return 200` with as many workers as the data plane has shards, the same wrk settings,
# alternating, several rounds; prints the medians and the ratios.
#
#   bench/http-ceiling.sh [SHARDS] [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
shards=${1:-1} rounds=${2:-3} secs=${3:-5}
conns=64 threads=1
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
command -v nginx >/dev/null || { echo "nginx is missing: apt-get install nginx-light" >&2; exit 1; }
cargo build --release -q -p seckill-dataplane
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

rport=$(port) nport=$(port) dport=$(port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >/dev/null &
pids+=($!)
cat > "$work/nginx.conf" <<NGINX
worker_processes $shards;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$nport reuseport; location / { return 200; } }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work" &
pids+=($!)
head -c 32 /dev/urandom | base64 > "$work/secret"
for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
target/release/seckill-dataplane serve --listen "127.0.0.1:$dport" --admin-listen "" --redis "redis://127.0.0.1:$rport" \
    --shards "$shards" --demo-issuer --secret-file "$work/secret" 2>"$work/dataplane.log" &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$dport/api/time" >/dev/null && break; sleep 0.1; done

# A campaign with one unit, bought, so every purchase after it ends on the shard.
cat > "$work/c.toml" <<TOML
id = "bench"
name = "bench"
total = 1
partitions = 1
per_user_limit = 1
hold_ttl_s = 300
price_cents = 1
TOML
cli() { target/release/seckill-dataplane campaign --redis "redis://127.0.0.1:$rport" "$@" >/dev/null; }
cli create --file "$work/c.toml"; cli arm bench; cli start bench
target/release/seckill-dataplane limits --redis "redis://127.0.0.1:$rport" set ip_rate=0 user_rate=0 auto_block_refusals=0 >/dev/null
sleep 0.5
token() { curl -s -XPOST "http://127.0.0.1:$dport/api/session" -d "{\"user_id\":\"$1\"}" | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])'; }
first=$(token first)
curl -s -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $first" >/dev/null
export SECKILL_TOKEN=$(token crowd)
sleep 0.6
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $SECKILL_TOKEN")
[ "$code" = 409 ] || { echo "expected 409 sold_out, got $code" >&2; exit 1; }

limits() { target/release/seckill-dataplane limits --redis "redis://127.0.0.1:$rport" set "$@" >/dev/null; sleep 0.5; }
rate() { wrk -t$threads -c$conns -d${secs}s "$@" 2>/dev/null | awk '/Requests\/sec/ {print $2}'; }
declare -A runs
for r in $(seq "$rounds"); do
  runs[nginx]+="$(rate "http://127.0.0.1:$nport/") "
  runs[time]+="$(rate "http://127.0.0.1:$dport/api/time") "
  runs[soldout]+="$(rate -s bench/purchase.lua "http://127.0.0.1:$dport/api/campaigns/bench/purchase") "
  limits user_rate=1 user_burst=1
  runs[limited]+="$(rate -s bench/purchase.lua "http://127.0.0.1:$dport/api/campaigns/bench/purchase") "
  limits user_rate=0
done
code=$(curl -s -o /dev/null -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $SECKILL_TOKEN")
[ "$code" = 409 ] || { echo "expected 409 sold_out after the runs, got $code" >&2; exit 1; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
n=$(echo "${runs[nginx]}" | median)
printf '%s shard(s), wrk -t%s -c%s -d%ss, %s rounds, median requests/s\n' "$shards" "$threads" "$conns" "$secs" "$rounds"
printf '%-36s %12s %8s   runs: %s\n' "nginx return 200" "$n" "1.00" "${runs[nginx]}"
for k in time soldout limited; do
  m=$(echo "${runs[$k]}" | median)
  case $k in
    time) label="GET /api/time" ;;
    soldout) label="purchase, sold out (ends on shard)" ;;
    limited) label="purchase, rate limited (429)" ;;
  esac
  printf '%-36s %12s %8.2f   runs: %s\n' "$label" "$m" "$(echo "$m / $n" | bc -l)" "${runs[$k]}"
done
