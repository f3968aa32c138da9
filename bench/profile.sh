#!/usr/bin/env bash
# Where a shard's time goes on the requests that end on the shard: wrk on `GET /api/time`
# and then on a refused purchase (a POST with a bearer token and a JSON body: sold out,
# rate limited or not started), while `perf record` samples the data plane (software
# clock, so it works where the CPU's counters are hidden). Prints the node's CPU per request of each, the purchase's hottest
# functions, and the functions whose time per request differs most between the two:
# where the purchase's extra cost goes.
#
#   bench/profile.sh [SECONDS] [TOP] [soldout|limited|early]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10} top=${2:-25} refusal=${3:-soldout}
case $refusal in
  soldout) label="sold-out purchase" campaign=bench ;;
  limited) label="rate-limited (429)" campaign=bench ;;
  early) label="not started (425)" campaign=later ;;
  *) echo "the refusal to profile must be soldout, limited or early, not '$refusal'" >&2; exit 2 ;;
esac
for tool in wrk perf; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install wrk linux-perf" >&2; exit 1; }
done
cargo build --release -q -p seckill-dataplane
. bench/lib.sh
start_redis
dport=$(port)
$bin/seckill-dataplane serve --listen "127.0.0.1:$dport" --admin-listen "" \
    --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards 1 --demo-issuer --demo-payments --secret-file "$work/secret" 2>"$work/dataplane.log" &
node=$!
pids+=($node)
wait_http "http://127.0.0.1:$dport"
sold_out_campaign
upcoming_campaign
buy_the_unit "http://127.0.0.1:$dport"
hz=2999
# sample FILE LABEL WRK_ARGS...: wrk while perf samples the node; the node's CPU (user
# and system ticks of /proc) per answered request, and the samples by function in FILE.sym.
sample() {
  local name=$1 label=$2 t0 t1 answered
  shift 2
  t0=$(awk '{print $14 + $15}' "/proc/$node/stat")
  perf record -q -e cpu-clock -F "$hz" -p "$node" -o "$work/$name.data" -- sleep "$secs" 2>/dev/null &
  local recorder=$!
  answered=$(wrk -t1 -c64 -d"${secs}s" "$@" | awk '/requests in/ {print $1}')
  wait "$recorder" || true
  t1=$(awk '{print $14 + $15}' "/proc/$node/stat")
  echo "$answered" > "$work/$name.n"
  printf '%-22s %9.0f requests/s   node CPU %6.2f µs a request (perf sampling included)\n' "$label" \
    "$(echo "$answered / $secs" | bc -l)" "$(echo "($t1 - $t0) * 1000000 / $(getconf CLK_TCK) / $answered" | bc -l)"
  perf report -i "$work/$name.data" --no-children --sort dso,symbol -F sample,dso,sym --stdio 2>/dev/null |
    grep -E '^ +[0-9]+ ' > "$work/$name.sym" || true
}
echo "1 shard, wrk -t1 -c64 -d${secs}s each:"
sample time "GET /api/time" "http://127.0.0.1:$dport/api/time"
if [ "$refusal" = limited ]; then
  $bin/seckill-dataplane limits --redis "$ops_redis" --redis-password-file "$ops_password_file" \
      set user_rate=1 user_burst=1 >/dev/null
  sleep 0.5
fi
sample post "$label" -s bench/purchase.lua "http://127.0.0.1:$dport/api/campaigns/$campaign/purchase"
python3 - "$work" "$hz" "$top" "$label" <<'PY'
import os, re, sys
work, hz, top, label = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def load(name):
    n = int(open(os.path.join(work, name + ".n")).read())
    d = {}
    for line in open(os.path.join(work, name + ".sym")):
        m = re.match(r"\s*(\d+)\s+(\S+)\s+\[(.)\]\s+(.*?)(\s+-\s+-)?\s*$", line)
        if m:
            dso = "kernel" if m.group(3) == "k" else m.group(2)
            key = f"{dso}: {m.group(4)}"
            d[key] = d.get(key, 0) + int(m.group(1)) / hz / n * 1e6
    return d
get, post = load("time"), load("post")
def by_part(d):
    parts = {}
    for k, v in d.items():
        part = "kernel" if k.startswith("kernel:") else ("libc, vdso" if k.startswith(("libc", "[vdso]")) else "the node's code")
        parts[part] = parts.get(part, 0) + v
    return parts
gp, pp = by_part(get), by_part(post)
print(f"\nsampled µs a request         GET /api/time {label:>19}   difference")
for part in ["the node's code", "libc, vdso", "kernel"]:
    print(f"{part:<28} {gp.get(part, 0):13.2f} {pp.get(part, 0):19.2f} {pp.get(part, 0) - gp.get(part, 0):+12.2f}")
print(f"{'in all':<28} {sum(gp.values()):13.2f} {sum(pp.values()):19.2f} {sum(pp.values()) - sum(gp.values()):+12.2f}")
print(f"\nthe {label}'s hottest functions (µs a request):")
for k, v in sorted(post.items(), key=lambda kv: -kv[1])[:top]:
    print(f"  {v:6.3f}  {k[:100]}")
print(f"\nwhere the purchase's extra time goes (µs a request: GET, purchase, difference):")
keys = sorted(set(get) | set(post), key=lambda k: -(post.get(k, 0) - get.get(k, 0)))
for k in keys[:top]:
    print(f"  {get.get(k, 0):6.3f} {post.get(k, 0):6.3f} {post.get(k, 0) - get.get(k, 0):+7.3f}  {k[:90]}")
PY
