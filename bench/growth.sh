#!/usr/bin/env bash
# How it grows: Redis CPU per purchase and a node's CPU per request as
#   (a) a campaign's partitions grow 1 → 64 (each shopper bought on their own partition,
#       as the node routes them), with what a live campaign costs when nobody buys (the
#       node's polls and housekeeping visit every partition);
#   (b) the holds waiting for payment in a partition grow 10k → 1M (each made by the
#       purchase script itself, pipelined, one shopper each; Redis memory per hold);
#   (c) the units per purchase grow 1 → 16 (campaigns allow 16 a shopper).
# Redis alone: redis-benchmark -P 16 -c 16 running the purchase script (EVALSHA, a new
# shopper each call, with an Idempotency-Key). Through a node of 1 shard: wrk, each request
# a new shopper with a token signed here, with an Idempotency-Key. CPU per call is each
# process's own CPU time (every thread's, from /proc/PID/task/*/schedstat) over the run,
# divided by its calls; medians of rounds, ratios the median of each round's own.
#
#   bench/growth.sh [ROUNDS] [SECONDS] [HOLDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-2} most=${3:-1000000}
for tool in wrk redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install wrk redis-tools" >&2; exit 1; }
done
cargo build --release -q -p seckill-dataplane
. bench/lib.sh
start_redis
redis_pid=${pids[-1]}
dport=$(port)
: > "$work/empty.toml"
$bin/seckill-dataplane serve --config "$work/empty.toml" --listen "127.0.0.1:$dport" \
    --admin-listen "" --no-worker --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards 1 --secret-file "$work/secret" 2>"$work/dataplane.log" &
node=$!
pids+=($node)
wait_http "http://127.0.0.1:$dport"
no_limits

# CPU time (ns) of every thread of a process so far.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'; }
used_memory() { rcli -p "$rport" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }
# evalsha: "calls usec_per_call" since the last CONFIG RESETSTAT.
evalsha() {
  rcli -p "$rport" INFO commandstats | tr -d '\r' |
      awk -F'[:=,]' '/^cmdstat_evalsha:/ {c = $3; u = $7} END {print c + 0, u + 0}'
}
# held CAMPAIGN PARTITIONS: the orders its partitions have made (each partition's seq).
held() {
  rcli -p "$rport" EVAL "local s = 0 for p = 0, tonumber(ARGV[2]) - 1 do
      s = s + (tonumber(redis.call('HGET', 'sk:{' .. ARGV[1] .. '.' .. p .. '}:part', 'seq')) or 0) end
      return s" 0 "$1" "$2"
}

# campaign ID PARTITIONS: a campaign of ample stock, up to 16 units a shopper, an hour to
# pay; created, armed and started with the CLI.
c=($bin/seckill-dataplane campaign --redis "$ops_redis" --redis-password-file "$ops_password_file")
campaign() {
  cat > "$work/$1.toml" <<TOML
id = "$1"
name = "$1"
total = 64000000
partitions = $2
per_user_limit = 16
hold_ttl_s = 3600
price_cents = 1
TOML
  "${c[@]}" create --file "$work/$1.toml" >/dev/null
  "${c[@]}" arm "$1" >/dev/null
  "${c[@]}" start "$1" >/dev/null
}

# (a) What a live campaign costs Redis and the node while nobody buys, added one at a
# time: each process's CPU time per second over a quiet stretch, before and after.
idle() {
  local r0 n0 r1 n1
  r0=$(cpu_ns "$redis_pid") n0=$(cpu_ns "$node")
  sleep 3
  r1=$(cpu_ns "$redis_pid") n1=$(cpu_ns "$node")
  echo "$(((r1 - r0) / 3000)) $(((n1 - n0) / 3000))"
}
sleep 1
echo "idle - $(idle)" > "$work/idle"
for p in 1 4 16 64; do
  campaign "g$p" "$p"
  sleep 0.5
  echo "idle $p $(idle)" >> "$work/idle"
done
campaign q1 1
campaign q4 1
campaign q16 1
levels="$((most / 100)) $((most / 10)) $most"
for n in $levels; do campaign "h$n" 1; done
sleep 0.5

purchase_lua=$(cargo run -q --release -p seckill-core --example script -- purchase.lua)
sha=$(rcli -p "$rport" SCRIPT LOAD "$purchase_lua")

# (b) The waiting holds: shoppers f<12 digits> each buy one unit of the campaign through
# the purchase script (the node's call without an Idempotency-Key), through
# redis-cli --pipe; Redis's used memory before and after.
: > "$work/fill"
for n in $levels; do
  m0=$(used_memory) t0=$(date +%s.%N)
  awk -v sha="$sha" -v id="h$n" -v n="$n" 'BEGIN {
    tag = "sk:{" id ".0}"
    head = sprintf("*17\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n6\r\n", sha)
    split(tag ":part " tag ":buyers " tag ":holds " tag ":events " tag ":once " tag ":passes", k, " ")
    for (j = 1; j <= 6; j++) head = head sprintf("$%d\r\n%s\r\n", length(k[j]), k[j])
    head = head sprintf("$%d\r\n%s\r\n$1\r\n0\r\n$%d\r\n%s:order:\r\n$13\r\n", \
        length(id), id, length(tag) + 7, tag)
    tail = "\r\n$1\r\n1\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n"
    for (i = 0; i < n; i++) printf "%sf%012d%s", head, i, tail
  }' | rcli -p "$rport" --pipe > "$work/pipe.out" 2>&1
  t1=$(date +%s.%N)
  grep -q "errors: 0, replies: $n" "$work/pipe.out" || { echo "filling h$n failed:" >&2; cat "$work/pipe.out" >&2; exit 1; }
  sleep 0.5
  m1=$(used_memory)
  [ "$(rcli -p "$rport" ZCARD "sk:{h$n.0}:holds")" = "$n" ] || { echo "h$n: holds not $n" >&2; exit 1; }
  echo "$n $(held "h$n" 1) $m0 $m1 $(echo "$n / ($t1 - $t0)" | bc -l)" >> "$work/fill"
done
# What the measurements add to a filled partition goes again after each run (its holds,
# order hashes and the node's idempotency records), so it stays at its level; their
# buyers, events and redis-benchmark's idempotency records (named by a random number of
# their own) stay. Prints the partition's seq, the order up to which it is clean.
trim_lua='local seq = tonumber(redis.call("HGET", KEYS[1], "seq"))
for s = tonumber(ARGV[2]) + 1, seq do
  local oid = ARGV[1] .. ".0." .. s
  local key = ARGV[3] .. oid
  local user = redis.call("HGET", key, "user")
  redis.call("ZREM", KEYS[2], oid)
  redis.call("DEL", key)
  if user then redis.call("HDEL", ARGV[4], "i:" .. user .. ":k") end
end
return seq'
declare -A clean
for n in $levels; do clean[h$n]=$n; done
trim() {
  [ -n "${clean[$1]:-}" ] || return 0
  local tag="sk:{$1.0}"
  clean[$1]=$(rcli -p "$rport" EVAL "$trim_lua" 2 "$tag:part" "$tag:holds" "$1" "${clean[$1]}" "$tag:order:" "$tag:once")
}

# Redis alone: redis-benchmark logs in as a user of its own that needs no password (its
# -a would be on the command line), limited to these campaigns' keys.
rcli -p "$rport" ACL SETUSER seckill-bench on nopass '~sk:{q*' '~sk:{h*' +@all -@dangerous >/dev/null
rb_calls=20000
# rb CAMPAIGN QTY: prints "purchases/s redis_µs_per_purchase in_script_µs refused" (the
# purchases counted by the partition's seq: the node's own scripts run meanwhile).
rb() {
  local tag="sk:{$1.0}" s0 s1 r0 r1 t0 t1 calls usec
  s0=$(held "$1" 1)
  rcli -p "$rport" CONFIG RESETSTAT >/dev/null
  r0=$(cpu_ns "$redis_pid") t0=$(date +%s%N)
  redis-benchmark -p "$rport" --user seckill-bench -a none -P 16 -c 16 -n "$rb_calls" -r 100000000 -q \
      EVALSHA "$sha" 6 "$tag:part" "$tag:buyers" "$tag:holds" "$tag:events" "$tag:once" "$tag:passes" \
      "$1" 0 "$tag:order:" u__rand_int__ "$2" k "" "" >/dev/null 2>&1 || true
  r1=$(cpu_ns "$redis_pid") t1=$(date +%s%N)
  read -r calls usec <<<"$(evalsha)"
  s1=$(held "$1" 1)
  trim "$1"
  local made=$((s1 - s0))
  echo "$((made * 1000000000 / (t1 - t0))) $(echo "($r1 - $r0) / 1000 / $made" | bc -l) $usec $((rb_calls - made))"
}

# Through the node: tokens signed here as the shop signs them (shopper_tokens), a new
# set of shoppers each round, more than a run can use.
per_round=$((secs * 40000))
for r in $(seq "$rounds"); do shopper_tokens "$work/tokens.$r" "$per_round" "w$r"; done
new_shoppers_script "$work/buy.lua"
first=$(head -1 "$work/tokens.1")
code=$(curl -s -o "$work/first.json" -w '%{http_code}' -XPOST "http://127.0.0.1:$dport/api/campaigns/q1/purchase" \
    -H "Authorization: Bearer $first" -H 'Idempotency-Key: k' -d '{"quantity": 1}')
[ "$code" = 200 ] || { echo "a purchase with a token signed here: HTTP $code $(cat "$work/first.json")" >&2; exit 1; }
# node CAMPAIGN PARTITIONS QTY ROUND: prints "requests/s node_µs_per_request
# redis_µs_per_purchase in_script_µs not_2xx" (Redis's CPU over the purchases the
# partitions' seq counted, which include the requests still in flight when wrk stops).
node_run() {
  local s0 s1 r0 r1 n0 n1 out calls usec
  s0=$(held "$1" "$2")
  rcli -p "$rport" CONFIG RESETSTAT >/dev/null
  r0=$(cpu_ns "$redis_pid") n0=$(cpu_ns "$node")
  out=$(TOKENS="$work/tokens.$4" BUY_PATH="/api/campaigns/$1/purchase" QTY="$3" \
      wrk -t1 -c64 -d"${secs}s" -s "$work/buy.lua" "http://127.0.0.1:$dport" 2>&1)
  r1=$(cpu_ns "$redis_pid") n1=$(cpu_ns "$node")
  read -r calls usec <<<"$(evalsha)"
  s1=$(held "$1" "$2")
  trim "$1"
  echo "$out" | awk -v d=$((n1 - n0)) -v r=$((r1 - r0)) -v h=$((s1 - s0)) -v u="$usec" '
    /requests in/ {q = $1} /Requests\/sec/ {x = $2} /Non-2xx/ {bad = $5}
    END {printf "%.0f %.2f %.2f %s %d\n", x, d / 1000 / q, r / 1000 / (h > 0 ? h : 1), u, bad + 0}'
}

# Each round: every configuration once, Redis alone and through the node.
: > "$work/runs"
for r in $(seq "$rounds"); do
  for k in q1 q4 q16 $(for n in $levels; do echo "h$n"; done); do
    case $k in q*) q=${k#q} ;; *) q=1 ;; esac
    echo "$r rb $k $(rb "$k" "$q")" >> "$work/runs"
  done
  for k in g1 g4 g16 g64 q1 q4 q16 $(for n in $levels; do echo "h$n"; done); do
    case $k in g*) p=${k#g} q=1 ;; q*) p=1 q=${k#q} ;; *) p=1 q=1 ;; esac
    echo "$r node $k $(node_run "$k" "$p" "$q" "$r")" >> "$work/runs"
  done
done

python3 - "$work" "$rounds" "$secs" "$rb_calls" "$levels" <<'PY'
import statistics, sys
work, rounds, secs, rb_calls, levels = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split()
runs = {}
for line in open(f"{work}/runs"):
    r, kind, k, *v = line.split()
    runs.setdefault((kind, k), {})[int(r)] = [float(x) for x in v]
med = lambda xs: statistics.median(xs)
def col(kind, k, i):
    rs = runs.get((kind, k))
    return med([v[i] for v in rs.values()]) if rs else None
def ratio(kind, k, base, i):
    a, b = runs.get((kind, k)), runs.get((kind, base))
    if not a or not b:
        return None
    return med([a[r][i] / b[r][i] for r in a if r in b and b[r][i]])
def refused(kind, k):
    rs = runs.get((kind, k))
    return int(sum(v[-1] for v in rs.values())) if rs else 0
short = lambda n: f"{int(n) // 1000000}M" if int(n) >= 1000000 else f"{int(n) // 1000}k" if int(n) >= 1000 else n
rows = [("partitions", [(f"{p}", f"g{p}") for p in (1, 4, 16, 64)], "g1"),
        ("units per purchase", [(f"{q}", f"q{q}") for q in (1, 4, 16)], "q1"),
        ("waiting holds (1 partition)", [(short(n), f"h{n}") for n in levels], f"h{levels[0]}")]
print(f"How it grows: Redis CPU per purchase and node CPU per request; {rounds} rounds, medians")
print(f"  Redis alone: redis-benchmark -P 16 -c 16, {rb_calls} purchase scripts a run (EVALSHA, a new shopper each)")
print(f"  node: 1 shard, wrk -t1 -c64 -d{secs}s on POST /api/campaigns/{{id}}/purchase, a new shopper each request")
print(f"  {'':30} {'Redis alone':>31} | {'through the node':>48}")
print(f"  {'':30} {'µs/purchase':>12} {'in-script':>10} {'× first':>7} | {'requests/s':>10} {'node µs':>8} {'Redis µs':>9} {'in-script':>10} {'× first':>7}")
fmt = lambda x, f: format("-", ">" + f.split(".")[0]) if x is None else format(x, f)
for title, items, base in rows:
    print(f"  {title}")
    for label, k in items:
        print(f"    {label:28} {fmt(col('rb', k, 1), '12.2f')} {fmt(col('rb', k, 2), '10.2f')} {fmt(ratio('rb', k, base, 1), '7.2f')} |"
              f" {fmt(col('node', k, 0), '10.0f')} {fmt(col('node', k, 1), '8.2f')} {fmt(col('node', k, 2), '9.2f')}"
              f" {fmt(col('node', k, 3), '10.2f')} {fmt(ratio('node', k, base, 2), '7.2f')}")
print("  (µs/purchase, Redis µs: redis-server's CPU time over a run per purchase it made; in-script:")
print("   commandstats usec_per_call of EVALSHA; node µs: the node's CPU time per request; × first:")
print("   Redis's CPU per purchase against the section's first row, the median of each round's own)")
for kind, what in (("rb", "redis-benchmark calls that made no order (its random shopper or key drawn twice)"),
                   ("node", "requests not answered 2xx")):
    bad = {k: refused(kind, k) for kind_, k in runs if kind_ == kind and refused(kind, k)}
    if bad:
        print(f"  {what}: " + ", ".join(f"{k} {n}" for k, n in bad.items()))

print("\nwhat a live campaign costs when nobody buys (each added in turn; CPU µs per second)")
idle = [line.split() for line in open(f"{work}/idle")]
prev = None
for _, p, redis_us, node_us in idle:
    label = "node alone, no campaign" if p == "-" else f"+ a campaign of {p} partition(s)"
    extra = "" if prev is None else f"   (+{int(redis_us) - prev[0]} Redis, +{int(node_us) - prev[1]} node)"
    print(f"  {label:34} Redis {int(redis_us):6} µs/s   node {int(node_us):6} µs/s{extra}")
    prev = (int(redis_us), int(node_us))

print("\nRedis memory of the waiting holds (used_memory before and after each fill by the purchase script)")
for line in open(f"{work}/fill"):
    n, held, m0, m1, rate = line.split()
    n, m0, m1 = int(n), int(m0), int(m1)
    print(f"  {short(n):>5} holds: {(m1 - m0) / 1e6:7.1f} MB, {(m1 - m0) / n:4.0f} bytes a hold (filled at {float(rate):.0f}/s)")

# Sizing from the rows that stay flat (all but the largest holds level) and from that one.
flat = med([col("node", k, 2) for _, items, _ in rows for _, k in items if k != f"h{levels[-1]}"])
top = col("node", f"h{levels[-1]}", 2)
print(f"\nsizing: Redis CPU per purchase through the node {flat:.1f} µs (median of the other rows), {top:.1f} µs"
      f" with {short(levels[-1])} holds waiting;\n  one Redis master (one core) makes about 1e6 / {flat:.1f} ="
      f" {1e6 / flat:,.0f} purchases/s, {1e6 / top:,.0f}/s with {short(levels[-1])} holds waiting")
PY
