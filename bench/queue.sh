#!/usr/bin/env bash
# The waiting room's status check with ten and with a million shoppers waiting:
#   1. Redis memory per waiting shopper, in the pre-queue and among later joiners (each
#      entry made by the room's own join script, pipelined);
#   2. the room's look script in Redis alone (redis-benchmark -P 16, a random waiting
#      shopper each call, and in the big room the same ten too): calls per second and
#      Redis CPU per call;
#   3. a node's answer to GET /api/campaigns/{id}/queue without a receipt (one script call
#      in Redis) and with one (the node's own copy of the admission counter), beside
#      GET /api/time in the same rounds, with the commands Redis ran over each wrk run.
# Rooms of one unit: one pass is given and everybody else goes on waiting.
#
#   bench/queue.sh [ROUNDS] [SECONDS] [WAITING]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5} crowd=${3:-1000000}
for tool in wrk redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: apt-get install wrk redis-tools" >&2; exit 1; }
done
cargo build --release -q -p seckill-dataplane
. bench/lib.sh
start_redis
redis_pid=${pids[-1]}
campaign=($bin/seckill-dataplane campaign --redis "$ops_redis" --redis-password-file "$ops_password_file")

# room ID: a campaign of one unit with a waiting room, armed (its pre-queue open).
room() {
  cat > "$work/$1.toml" <<TOML
id = "$1"
name = "$1"
total = 1
partitions = 1
per_user_limit = 1
hold_ttl_s = 3600
price_cents = 1
[queue]
admit_per_s = 100
pass_ttl_s = 3600
TOML
  "${campaign[@]}" create --file "$work/$1.toml" >/dev/null
  "${campaign[@]}" arm "$1" >/dev/null
}
sha=$(rcli -p "$rport" SCRIPT LOAD "$(cargo run -q --release -p seckill-core --example script -- queue_join.lua)")
room_keys() { local t="sk:{$1.queue}"; echo "$t:meta $t:pre $t:post $t:joined $t:admitted"; }
# Shoppers are u<12 digits>, the way redis-benchmark writes __rand_int__.
user() { printf 'u%012d' "$1"; }
used_memory() { rcli -p "$rport" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }
# joins ROOM COUNT: shoppers 0..COUNT-1 join ROOM by its join script (EVALSHA, the
# node's arguments: a 32-hex seed kept by the room's first join), through
# redis-cli --pipe; prints the joins per second.
joins() {
  local seed t0 t1
  seed=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  t0=$(date +%s.%N)
  awk -v sha="$sha" -v keys="$(room_keys "$1")" -v n="$2" -v seed="$seed" 'BEGIN {
    split(keys, k, " ")
    head = sprintf("*11\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$1\r\n5\r\n", sha)
    for (j = 1; j <= 5; j++) head = head sprintf("$%d\r\n%s\r\n", length(k[j]), k[j])
    head = head "$4\r\njoin\r\n$13\r\n"
    tail = sprintf("\r\n$%d\r\n%s\r\n", length(seed), seed)
    for (i = 0; i < n; i++) printf "%su%012d%s", head, i, tail
  }' | rcli -p "$rport" --pipe > "$work/pipe.out" 2>&1
  t1=$(date +%s.%N)
  grep -q "errors: 0, replies: $2" "$work/pipe.out" || { echo "joins into $1 failed:" >&2; cat "$work/pipe.out" >&2; exit 1; }
  echo "$2 / ($t1 - $t0)" | bc -l | xargs printf '%.0f'
}
# look ROOM USER: the script's answer to a look: standing, place, admissions so far.
look() {
  rcli -p "$rport" EVALSHA "$sha" 5 $(room_keys "$1") look "$2" "" |
      awk 'NR == 1 {k = $0} NR == 2 {p = $0} NR == 4 {a = $0} END {printf "%s, place %s, %s admitted", k, p, a}'
}
settle() { sleep 1; }

echo "Redis memory per waiting shopper (used_memory before and after; entries made by the join script, user ids of 13 characters)"
room q10
room q1m
room late
settle
m0=$(used_memory)
rate=$(joins q1m "$crowd")
settle
m1=$(used_memory)
printf '  pre-queue (before the opening), %d joiners: %.1f MB, %.0f bytes each (joined at %s/s)\n' \
    "$crowd" "$(echo "($m1 - $m0) / 1000000" | bc -l)" "$(echo "($m1 - $m0) / $crowd" | bc -l)" "$rate"
joins q10 10 >/dev/null
for r in q10 q1m late; do "${campaign[@]}" start "$r" >/dev/null; done
# The opening: the first look or join after the start draws the room.
for r in q10 q1m late; do look "$r" "$(user 0)" >/dev/null; done
settle
m2=$(used_memory)
rate=$(joins late "$crowd")
settle
m3=$(used_memory)
printf '  after the opening (line + joined time), %d joiners: %.1f MB, %.0f bytes each (joined at %s/s)\n' \
    "$crowd" "$(echo "($m3 - $m2) / 1000000" | bc -l)" "$(echo "($m3 - $m2) / $crowd" | bc -l)" "$rate"
# Its admission would only add rounds to the count of commands below.
"${campaign[@]}" stop late >/dev/null
printf '  the look script on shopper %s of the %s, after the draw: %s\n' "$(user $((crowd / 2)))" "$crowd" "$(look q1m "$(user $((crowd / 2)))")"

# The look script alone: redis-benchmark logs in as a user of its own that needs no
# password (its -a would be on the command line), limited to the rooms' keys.
rcli -p "$rport" ACL SETUSER seckill-bench on nopass '~sk:{q*' +@all -@dangerous >/dev/null
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$redis_pid/stat"; }
evalsha_calls() { rcli -p "$rport" INFO commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2}'; }
# bench_looks ROOM N: SECONDS of looks at random shoppers among the first N; prints
# "calls/s cpu_µs_per_call usec_per_call" (Redis's CPU time over the 100 ms samples in
# which scripts ran; commandstats' time inside the command).
bench_looks() {
  local samples="$work/samples"
  rcli -p "$rport" CONFIG RESETSTAT >/dev/null
  ( while :; do echo "$(date +%s.%N) $(cpu_ticks) $(evalsha_calls)"; sleep 0.1; done ) > "$samples" &
  local sampler=$!
  timeout "$secs" redis-benchmark -p "$rport" --user seckill-bench -a none -P 16 -c 16 \
      -n 1000000000 -r "$2" -q EVALSHA "$sha" 5 $(room_keys "$1") look u__rand_int__ "" >/dev/null 2>&1 || true
  sleep 0.3
  kill $sampler 2>/dev/null; wait $sampler 2>/dev/null || true
  local usec
  usec=$(rcli -p "$rport" INFO commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $6}')
  python3 - "$samples" "$hz" "$usec" <<'PY'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 3]
hz = float(sys.argv[2])
busy = [i for i in range(1, len(rows)) if rows[i][2] - rows[i - 1][2] > 100]
a, b = rows[busy[0] - 1], rows[busy[-1]]
calls = b[2] - a[2]
print(round(calls / (b[0] - a[0])), round((b[1] - a[1]) / hz * 1e6 / calls, 2), sys.argv[3])
PY
}
# Each round: 10 waiting; a million, a random one each call; a million, the same ten
# shoppers again and again (the same steps as for a random one, but in the CPU's caches).
kinds="q10 q1m hot"
declare -A rb cpu usec
for r in $(seq "$rounds"); do
  declare -A this=()
  for k in $kinds; do
    case $k in
      q10) args=(q10 10) ;;
      q1m) args=(q1m "$crowd") ;;
      hot) args=(q1m 10) ;;
    esac
    read -r a b c <<<"$(bench_looks "${args[@]}")"
    this[$k]="$a $b $c"
    rb[$k]+="$a " cpu[$k]+="$b " usec[$k]+="$c "
  done
  read -r a0 b0 c0 <<<"${this[q10]}"
  read -r a1 b1 c1 <<<"${this[q1m]}"
  rb[ratio]+="$(echo "$a1 / $a0" | bc -l) " cpu[ratio]+="$(echo "$b1 / $b0" | bc -l) " usec[ratio]+="$(echo "$c1 / $c0" | bc -l) "
done
echo
printf 'the look script alone: redis-benchmark -P 16 -c 16; %s rounds of %s s, medians\n' "$rounds" "$secs"
printf '  %-36s %10s %14s %14s\n' "" "looks/s" "Redis CPU µs" "in-script µs"
for k in q10 q1m hot ratio; do
  case $k in
    q10) label="10 waiting, a random one each call" ;;
    q1m) label="$crowd waiting, a random one" ;;
    hot) label="$crowd waiting, the same 10" ;;
    ratio) label="$crowd / 10 (random ones)" ;;
  esac
  if [ "$k" = ratio ]; then
    printf '  %-36s %10.2f %14.2f %14.2f\n' "$label" "$(echo "${rb[$k]}" | median)" \
        "$(echo "${cpu[$k]}" | median)" "$(echo "${usec[$k]}" | median)"
  else
    printf '  %-36s %10s %14s %14s   runs: %s\n' "$label" "$(echo "${rb[$k]}" | median)" \
        "$(echo "${cpu[$k]}" | median)" "$(echo "${usec[$k]}" | median)" "${rb[$k]}"
  fi
done
printf '  (Redis CPU: its process time per call over the 100 ms samples in which scripts ran;\n'
printf '   in-script: commandstats usec_per_call; ratios: the median of each round'"'"'s own)\n'

# The node: one shard, tokens from its demo issuer (loopback only), limits lifted.
dport=$(port)
: > "$work/empty.toml"
$bin/seckill-dataplane serve --config "$work/empty.toml" --listen "127.0.0.1:$dport" \
    --admin-listen "" --no-worker --redis "$node_redis" --redis-password-file "$node_password_file" \
    --shards 1 --demo-issuer --demo-payments --secret-file "$work/secret" 2>"$work/dataplane.log" &
node=$!
pids+=($node)
wait_http "http://127.0.0.1:$dport"
no_limits
# Each room's admission gives its one pass within a round or two.
sleep 1
# Shoppers who wait, each with a token and the receipt of a join (which, for one already
# in line, answers their place): all of q10's but the one let through, 1,000 of q1m's at
# random. A line per shopper: token, receipt, place.
python3 - "$dport" "$crowd" "$work" <<'PY'
import http.client, json, random, sys
port, crowd, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port)
def call(method, path, body, headers={}):
    c.request(method, path, body, headers)
    r = c.getresponse()
    data = r.read()
    assert r.status == 200, (method, path, r.status, data)
    return json.loads(data)
for room, users in (("q10", range(10)), ("q1m", random.sample(range(crowd), min(1000, crowd)))):
    with open(f"{work}/{room}.tsv", "w") as out:
        for u in users:
            token = call("POST", "/api/session", json.dumps({"user_id": f"u{u:012d}"}))["token"]
            v = call("POST", f"/api/campaigns/{room}/queue", "{}", {"Authorization": f"Bearer {token}"})
            if v["state"] == "waiting" and v["place"] > 1:
                out.write(f"{token}\t{v['receipt']}\t{v['place']}\n")
PY
# wrk: GETs $LOOK_PATH, each request a shopper of $LOOKS in turn, with their receipt when
# $WITH_RECEIPT is 1 (the requests are built once, at the start).
cat > "$work/look.lua" <<'LUA'
local requests, i = {}, 0
function init(args)
  for line in io.lines(os.getenv("LOOKS")) do
    local token, receipt = line:match("^([^\t]+)\t([^\t]+)")
    local headers = { ["Authorization"] = "Bearer " .. token }
    if os.getenv("WITH_RECEIPT") == "1" then headers["Queue-Receipt"] = receipt end
    requests[#requests + 1] = wrk.format("GET", os.getenv("LOOK_PATH"), headers)
  end
end
LUA
wrk_cycle >> "$work/look.lua"
# Redis's scripts and commands so far (a script's own calls count as commands), but for
# the INFO and AUTH of these readings: "scripts commands".
calls() {
  rcli -p "$rport" INFO commandstats | tr -d '\r' | awk -F'[:=,]' '
    /^cmdstat_evalsha:/ {s = $3} /^cmdstat_/ && !/^cmdstat_(info|auth):/ {n += $3}
    END {print s + 0, n + 0}'
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# wrk_run ROOM PATH WITH_RECEIPT: prints "requests/s requests scripts commands node_ticks
# redis_ticks non_2xx": what Redis ran and the CPU time the node and Redis took during the run.
wrk_run() {
  local s0 n0 s1 n1 d0 d1 r0 r1 out
  read -r s0 n0 <<<"$(calls)"
  d0=$(ticks "$node") r0=$(ticks "$redis_pid")
  out=$(LOOKS="$work/$1.tsv" LOOK_PATH="$2" WITH_RECEIPT="$3" \
      wrk -t1 -c64 -d"${secs}s" -s "$work/look.lua" "http://127.0.0.1:$dport" 2>&1)
  d1=$(ticks "$node") r1=$(ticks "$redis_pid")
  read -r s1 n1 <<<"$(calls)"
  echo "$out" | awk -v s=$((s1 - s0)) -v n=$((n1 - n0)) -v d=$((d1 - d0)) -v r=$((r1 - r0)) '
    /requests in/ {q = $1} /Requests\/sec/ {x = $2} /Non-2xx/ {bad = $5}
    END {printf "%.0f %d %d %d %d %d %d\n", x, q, s, n, d, r, bad + 0}'
}
shown() { python3 -c 'import json, sys; v = json.load(sys.stdin); v.pop("receipt", None); print(json.dumps(v))'; }
u=$(head -1 "$work/q1m.tsv" | cut -f1) rc=$(head -1 "$work/q1m.tsv" | cut -f2)
q="http://127.0.0.1:$dport/api/campaigns/q1m/queue"
with=$(curl -s "$q" -H "Authorization: Bearer $u" -H "Queue-Receipt: $rc" | shown)
without=$(curl -s "$q" -H "Authorization: Bearer $u" | shown)
# Each round: /api/time, then each pair compared side by side.
kinds="time q10:receipt q1m:receipt q10:none q1m:none"
declare -A rps ratio node_us redis_us cmds per bad
us() { echo "$1 * 1000000 / $hz / $2" | bc -l; }
for r in $(seq "$rounds"); do
  declare -A this=() nus=() rus=()
  for k in $kinds; do
    case $k in
      time) args=(q1m /api/time 1) ;;
      *:none) args=("${k%%:*}" "/api/campaigns/${k%%:*}/queue" 0) ;;
      *:receipt) args=("${k%%:*}" "/api/campaigns/${k%%:*}/queue" 1) ;;
    esac
    read -r a n s c d rt b <<<"$(wrk_run "${args[@]}")"
    this[$k]=$a nus[$k]=$(us "$d" "$n") rus[$k]=$(us "$rt" "$n")
    rps[$k]+="$a " cmds[$k]+="$c " bad[$k]=$((${bad[$k]:-0} + b))
    node_us[$k]+="${nus[$k]} " redis_us[$k]+="${rus[$k]} "
    per[$k]+="$(echo "$s / $n" | bc -l) "
    ratio[$k]+="$(echo "$a / ${this[time]}" | bc -l) "
  done
  for w in receipt none; do
    ratio[$w]+="$(echo "${this[q1m:$w]} / ${this[q10:$w]}" | bc -l) "
    node_us[$w]+="$(echo "${nus[q1m:$w]} / ${nus[q10:$w]}" | bc -l) "
    redis_us[$w]+="$(echo "${rus[q1m:$w]} / ${rus[q10:$w]}" | bc -l) "
  done
done
echo
printf 'GET /api/campaigns/{id}/queue on 1 shard, wrk -t1 -c64 -d%ss, %s rounds, medians; each request\n' "$secs" "$rounds"
printf 'a waiting shopper in turn (10 waiting: the %s not let through; %s waiting: %s at random),\n' \
    "$(wc -l < "$work/q10.tsv")" "$crowd" "$(wc -l < "$work/q1m.tsv")"
printf 'with the same token and receipt headers on /api/time\n'
printf '  %-28s %10s %7s %9s %9s %11s %12s\n' "" "requests/s" "× time" "node µs" "Redis µs" "Redis cmds" "scripts/req"
for k in $kinds receipt none; do
  case $k in
    time) label="GET /api/time" ;;
    q10:receipt) label="10 waiting, receipt" ;;
    q1m:receipt) label="$crowd waiting, receipt" ;;
    q10:none) label="10 waiting, no receipt" ;;
    q1m:none) label="$crowd waiting, no receipt" ;;
    receipt) label="$crowd / 10, receipt" ;;
    none) label="$crowd / 10, no receipt" ;;
  esac
  case $k in
    receipt)
      # Redis's time during a receipt run is its background's, not the looks'.
      printf '  %-28s %10.2f %7s %9.2f\n' "$label" "$(echo "${ratio[$k]}" | median)" "" \
          "$(echo "${node_us[$k]}" | median)" ;;
    none)
      printf '  %-28s %10.2f %7s %9.2f %9.2f\n' "$label" "$(echo "${ratio[$k]}" | median)" "" \
          "$(echo "${node_us[$k]}" | median)" "$(echo "${redis_us[$k]}" | median)" ;;
    *)
      printf '  %-28s %10s %7.2f %9.2f %9.2f %11s %12.4f   runs: %s\n' "$label" "$(echo "${rps[$k]}" | median)" \
          "$(echo "${ratio[$k]}" | median)" "$(echo "${node_us[$k]}" | median)" "$(echo "${redis_us[$k]}" | median)" \
          "$(echo "${cmds[$k]}" | median)" "$(echo "${per[$k]}" | median)" "${rps[$k]}"
      [ "${bad[$k]}" = 0 ] || printf '  %-28s %s answers not 2xx\n' "" "${bad[$k]}" ;;
  esac
done
printf '  (node µs, Redis µs: each process'"'"'s CPU time per request over the run; Redis cmds: every\n'
printf '   command Redis ran in the %s s of a run, a script'"'"'s own calls and the node'"'"'s admission rounds\n' "$secs"
printf '   and control sync included: a look without receipt is 1 script of 5 commands; ratios: the\n'
printf '   median of each round'"'"'s own)\n'
printf '  a look with its receipt:  %s\n' "$with"
printf '  the same look without:    %s\n' "$without"
