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
count_secs=${1:-4}
for tool in valgrind callgrind_control callgrind_annotate wrk; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install valgrind wrk" >&2; exit 1; }
done
cargo build --release -q -p seckill-dataplane
. bench/lib.sh
. bench/callgrind.sh
start_redis

# measure NAME BINARY: every route's count for one build.
measure() {
  counted_node "$1" "$2"
  [ -n "$campaigns_made" ] || { sold_out_campaign; upcoming_campaign; buy_the_unit "$url"; campaigns_made=1; }
  count_route "$1" time 200 "$url/api/time"
  count_route "$1" soldout 409 -s bench/purchase-counted.lua "$url/api/campaigns/bench/purchase"
  SECKILL_IDEMPOTENCY_KEY=no-order-here \
    count_route "$1" keyed 409 -s bench/purchase-counted.lua "$url/api/campaigns/bench/purchase"
  count_route "$1" early 425 -s bench/purchase-counted.lua "$url/api/campaigns/later/purchase"
  limits user_rate=1 user_burst=1
  sleep 0.5   # a node under valgrind reads them more slowly
  count_route "$1" limited 429 -s bench/purchase-counted.lua "$url/api/campaigns/bench/purchase"
  limits user_rate=0
  sleep 0.5
  kill "$vg"; wait "$vg" 2>/dev/null || true
}
campaigns_made= builds=(node)
measure node "$bin/seckill-dataplane"
[ -z "${BASELINE:-}" ] || { measure baseline "$BASELINE"; builds+=(baseline); }

echo "1 shard under callgrind, wrk -t1 -c8 -d${count_secs}s a route; the node's instructions a request (user space)"
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
