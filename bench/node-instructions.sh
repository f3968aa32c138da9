#!/usr/bin/env bash
# The node's own work a request that ends on the shard, counted in instructions: one
# shard under valgrind's callgrind, `GET /api/time` and the refusals of
# bench/http-ceiling.sh (sold out, without and with an Idempotency-Key that has no first
# answer; not started; rate limited; a bearer token and a JSON body, as a client sends
# them), each counted only while wrk sends it. Where CPU time on
# this shared machine moves by a tenth from run to run, a count repeats to within a
# fraction of a per cent; it leaves out the kernel's part (the system calls, TCP), which
# is the same for every route, so the refusals' ratio to `/api/time` here is lower than
# in CPU time. Then where a sold-out purchase's instructions go beside `/api/time`'s:
# each function's own count, a request, summed by the crate it belongs to.
#
#   bench/node-instructions.sh [SECONDS]
#   BASELINE=path/to/an/older/seckill-dataplane bench/node-instructions.sh   # counted beside
set -euo pipefail
[ -z "${BASELINE:-}" ] || BASELINE=$(realpath "$BASELINE")
cd "$(dirname "$0")/.."
secs=${1:-4}
for tool in valgrind callgrind_control callgrind_annotate wrk; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install valgrind wrk" >&2; exit 1; }
done
cargo build --release -q -p seckill-dataplane
. bench/lib.sh
start_redis

# node NAME BINARY: the node under callgrind, counting nothing until told; sets vg and url.
node() {
  local p
  p=$(port)
  mkdir -p "$work/$1"
  valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes \
      --callgrind-out-file="$work/$1/cg.%p" \
      "$2" serve --listen "127.0.0.1:$p" --admin-listen "" --redis "$node_redis" \
      --redis-password-file "$node_password_file" --shards 1 --demo-issuer \
      --secret-file "$work/secret" 2>"$work/$1/node.log" &
  vg=$!
  pids+=("$vg")
  url="http://127.0.0.1:$p"
  # Up once it has read the campaigns (and with them the limits: until then a node
  # keeps the default ones, under which wrk's flood would get its address blocked).
  for _ in $(seq 600); do
    curl -sf "$url/api/campaigns" >/dev/null 2>&1 && break
    kill -0 "$vg" 2>/dev/null || break
    sleep 0.2
  done
  curl -sf "$url/api/campaigns" >/dev/null || { echo "the node did not start under valgrind:" >&2; tail -20 "$work/$1/node.log" >&2; exit 1; }
  sleep 1
}
# count NAME ROUTE STATUS WRK_ARGS...: instructions a request while wrk sends ROUTE's
# requests (after a second of them uncounted), each of which must be answered STATUS
# with no socket error; the profile to $work/NAME/ROUTE.cg.
count() {
  local name=$1 route=$2 status=$3 out n f
  shift 3
  wrk -t1 -c8 -d1s "$@" >/dev/null 2>&1
  callgrind_control -z "$vg" >/dev/null 2>&1
  callgrind_control -i on "$vg" >/dev/null 2>&1
  out=$(wrk -t1 -c8 -d"${secs}s" "$@" 2>/dev/null)
  callgrind_control -i off "$vg" >/dev/null 2>&1
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  callgrind_control -d "$route" "$vg" >/dev/null 2>&1
  sleep 1
  # A file a thread: the shard's is the one that ran the most; the others (the order
  # worker, the runtime's helpers) run on their own clocks, not the requests'.
  f=$(for c in "$work/$name"/cg.*-*; do
        [ -e "$c" ] && echo "$(awk '/^totals:/ {print $2; exit}' "$c") $c"
      done | sort -n | tail -1 | cut -d' ' -f2)
  [ -n "$f" ] || { echo "$name $route: callgrind wrote no profile" >&2; exit 1; }
  mv "$f" "$work/$name/$route.cg"
  rm -f "$work/$name"/cg.*-*
  # The answers counted must be the route's own: wrk counts the others as non-2xx, its
  # purchase script counts each status. The rate limit of one a second lets a purchase
  # through each second; nothing else may differ.
  local allowed=0 others
  [ "$route" != limited ] || allowed=$((secs + 2))
  if grep -q "Socket errors" <<<"$out"; then
    echo "$name $route: wrk's sockets failed: $(grep 'Socket errors' <<<"$out")" >&2; exit 1
  fi
  if [ "$status" = 200 ]; then
    others=$(awk '/Non-2xx or 3xx responses/ {print $NF}' <<<"$out")
  else
    others=$(awk -v s="$status" '$1 == "status" && $2 != s ":" {n += $3} END {print n + 0}' <<<"$out")
    grep -q "^status $status: " <<<"$out" || others=$n
  fi
  [ "${others:-0}" -le "$allowed" ] || {
    echo "$name $route: $others of $n answers were not $status:" $(grep "^status" <<<"$out") >&2; exit 1; }
  echo "$route $n $(awk '/^totals:/ {print $2; exit}' "$work/$name/$route.cg")" >> "$work/$name/counts"
}
# measure NAME BINARY: every route's count for one build.
measure() {
  node "$1" "$2"
  [ -n "$campaigns_made" ] || { sold_out_campaign; upcoming_campaign; buy_the_unit "$url"; campaigns_made=1; }
  count "$1" time 200 "$url/api/time"
  count "$1" soldout 409 -s bench/purchase-counted.lua "$url/api/campaigns/bench/purchase"
  SECKILL_IDEMPOTENCY_KEY=no-order-here \
    count "$1" keyed 409 -s bench/purchase-counted.lua "$url/api/campaigns/bench/purchase"
  count "$1" early 425 -s bench/purchase-counted.lua "$url/api/campaigns/later/purchase"
  limits user_rate=1 user_burst=1
  sleep 0.5   # a node under valgrind reads them more slowly
  count "$1" limited 429 -s bench/purchase-counted.lua "$url/api/campaigns/bench/purchase"
  limits user_rate=0
  sleep 0.5
  kill "$vg"; wait "$vg" 2>/dev/null || true
}
campaigns_made= builds=(node)
measure node "$bin/seckill-dataplane"
[ -z "${BASELINE:-}" ] || { measure baseline "$BASELINE"; builds+=(baseline); }

echo "1 shard under callgrind, wrk -t1 -c8 -d${secs}s a route; the node's instructions a request (user space)"
for b in "${builds[@]}"; do
  python3 - "$work/$b/counts" "$b" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    route, n, ir = line.split()
    rows[route] = (int(n), int(ir))
label = {"time": "GET /api/time", "soldout": "purchase, sold out", "keyed": "purchase, sold out, with a key",
         "early": "purchase, not started (425)", "limited": "purchase, rate limited (429)"}
t = rows["time"][1] / rows["time"][0]
name = "" if sys.argv[2] == "node" else "baseline: "
for route in ("time", "soldout", "keyed", "early", "limited"):
    n, ir = rows[route]
    each = ir / n
    print(f"  {name + label[route]:42} {each:9.0f}   × /api/time {t / each:5.2f}   ({n} requests)")
PY
done
# Where the difference goes: each function's own instructions (inclusive ones add up
# badly over async state machines), summed by the crate it belongs to.
annotate() { callgrind_annotate --auto=no --threshold=100 "$1" 2>/dev/null; }
annotate "$work/node/time.cg" > "$work/time.txt"
annotate "$work/node/soldout.cg" > "$work/soldout.txt"
python3 - "$work/node/counts" "$work/time.txt" "$work/soldout.txt" <<'PY'
import re, sys
counts = [l.split() for l in open(sys.argv[1])]
n = {route: int(requests) for route, requests, _ in counts}
totals = {route: int(ir) for route, _, ir in counts}
def crate(name, obj):
    if not obj.endswith("seckill-dataplane"):
        return obj.rsplit("/", 1)[-1].split(".so")[0]
    first = re.search(r"([A-Za-z_][A-Za-z0-9_]*)::", name)
    return first.group(1) if first else "the node's binary, unnamed"
def load(path, requests):
    out = {}
    for line in open(path):
        # "count (share) file:function [object]", the object left out where a function's
        # lines come from a file of another (inlined code: the C library's files are
        # its own, under "./").
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S+?):(.*?)(?: \[(.*)\])?$", line)
        if not m or m.group(2) == "PROGRAM":
            continue
        obj = m.group(4) or ("libc.so" if m.group(2).startswith("./") else "seckill-dataplane")
        c = crate(m.group(3), obj)
        out[c] = out.get(c, 0) + int(m.group(1).replace(",", "")) / requests
    return out
t, s = load(sys.argv[2], n["time"]), load(sys.argv[3], n["soldout"])
# Every instruction of the profile is some function's own: the sums are the totals.
for route, counted in (("time", t), ("soldout", s)):
    total = totals[route] / n[route]
    if abs(sum(counted.values()) - total) > total / 1000:
        sys.exit(f"{route}: the functions' counts add up to {sum(counted.values()):.0f} a request, "
                 f"not the profile's {total:.0f}")
rows = sorted(set(t) | set(s), key=lambda k: -abs(s.get(k, 0) - t.get(k, 0)))
print("where a sold-out purchase's instructions go beside /api/time's: each function's own, a request, by crate")
print(f"  {'sold out':>9} {'/api/time':>9} {'more':>7}")
for k in rows[:12]:
    print(f"  {s.get(k, 0):9.0f} {t.get(k, 0):9.0f} {s.get(k, 0) - t.get(k, 0):+7.0f}  {k}")
rest_s, rest_t = (sum(d.get(k, 0) for k in rows[12:]) for d in (s, t))
print(f"  {rest_s:9.0f} {rest_t:9.0f} {rest_s - rest_t:+7.0f}  the rest")
print(f"  {sum(s.values()):9.0f} {sum(t.values()):9.0f} {sum(s.values()) - sum(t.values()):+7.0f}  in all")
PY
