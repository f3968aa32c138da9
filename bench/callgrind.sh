# Sourced after bench/lib.sh by the scripts that count instructions under valgrind's
# callgrind (bench/node-instructions.sh, bench/script-instructions.sh and the guard
# bench/instructions-guard.sh): a node counted while wrk sends one route, and a
# redis-server counted over calls of a script. A count repeats to within a fraction of
# a per cent for the same binary and load, where CPU time on a shared machine does not.

# The seconds wrk sends each route for (after one second uncounted).
count_secs=${count_secs:-4}

# counted_node NAME BINARY: the node BINARY under callgrind, one shard and no order
# worker (the orders it holds stay in Redis), counting nothing until told; sets vg
# (valgrind's pid) and url.
counted_node() {
  local p
  p=$(port)
  mkdir -p "$work/$1"
  valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes \
      --callgrind-out-file="$work/$1/cg.%p" \
      "$2" serve --listen "127.0.0.1:$p" --admin-listen "" --redis "$node_redis" \
      --redis-password-file "$node_password_file" --shards 1 --no-worker --demo-issuer --demo-payments \
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

# count_route NAME ROUTE STATUS WRK_ARGS...: instructions a request while wrk sends
# ROUTE's requests to the node of counted_node (after a second of them uncounted), each
# of which must be answered STATUS with no socket error; the profile to
# $work/NAME/ROUTE.cg and "ROUTE requests instructions" to $work/NAME/counts.
count_route() {
  local name=$1 route=$2 status=$3 out n f
  shift 3
  wrk -t1 -c8 -d1s --timeout 30s "$@" >/dev/null 2>&1
  callgrind_control -z "$vg" >/dev/null 2>&1
  callgrind_control -i on "$vg" >/dev/null 2>&1
  out=$(wrk -t1 -c8 -d"${count_secs}s" --timeout 30s "$@" 2>/dev/null)
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
  [ "$route" != limited ] || allowed=$((count_secs + 2))
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

# The purchase script's keys for partition 0 of campaign "ci", as the shard passes them.
purchase_tag="sk:{ci.0}"
purchase_keys=(6 "$purchase_tag:part" "$purchase_tag:buyers" "$purchase_tag:holds" "$purchase_tag:events"
    "$purchase_tag:once" "$purchase_tag:passes")
# purchase_args N: sets purchase_argv to the script's arguments for N purchases a call,
# each a shopper redis-benchmark makes up (u__rand_int__), one unit, with a key.
purchase_args() {
  purchase_argv=(ci 0 "$purchase_tag:order:")
  for _ in $(seq "$1"); do purchase_argv+=(u__rand_int__ 1 k "" ""); done
}

# bare_cli ARGS...: redis-cli to a redis-server of redis_count's, which has no users: no
# password of the managed users' goes with its calls.
bare_cli() { env -u REDISCLI_AUTH redis-cli "$@"; }

# redis_count SCRIPT KEYS CALLS ARGS...: instructions redis-server ran for CALLS calls of
# SCRIPT (EVALSHA with KEYS keys and ARGS, pipelined), start to stop, and the orders made.
redis_count() {
  local script=$1 nkeys=$2 calls=$3; shift 3
  local p out sha
  p=$(port) out="$work/cg.$p"
  valgrind --tool=callgrind --callgrind-out-file="$out" redis-server --port "$p" \
      --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >/dev/null 2>&1 &
  local vg=$!
  for _ in $(seq 300); do bare_cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
  sha=$(bare_cli -p "$p" SCRIPT LOAD "$(cat "$script")")
  # A partition of ample stock, open, one unit a shopper; as arm_partition.lua leaves it.
  bare_cli -p "$p" HSET "$purchase_tag:part" initial 100000000 stock 100000000 held 0 sold 0 \
      transit 0 inflow 0 seq 0 xseq 0 state live layout 2 limit 1 hold_ttl_ms 600000 \
      starts_at_ms 0 ends_at_ms 0 >/dev/null
  redis-benchmark -p "$p" -P 16 -c 4 -n "$calls" -r 1000000000 -q \
      EVALSHA "$sha" "$nkeys" "$@" >/dev/null 2>&1
  local made
  made=$(bare_cli -p "$p" HGET "$purchase_tag:part" seq || echo 0)
  bare_cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
  wait "$vg" || true
  echo "$(awk '/^summary:/ {print $2; exit}' "$out") $made"
  rm -f "$out"
}

# per_order NAME ORDERS PER-CALL SCRIPT KEYS ARGS...: Redis's instructions for one more
# order: SCRIPT run for ORDERS and for twice as many orders, PER-CALL a call, the
# difference over the orders it made (without the server's start and stop).
per_order() {
  local name=$1 orders=$2 n=$3; shift 3
  local calls=$((orders / n)) ia oa ib ob
  read -r ia oa <<<"$(redis_count "$1" "$2" "$calls" "${@:3}")"
  read -r ib ob <<<"$(redis_count "$1" "$2" $((2 * calls)) "${@:3}")"
  [ "$ob" -gt "$oa" ] || { echo "$name: no orders made" >&2; exit 1; }
  echo "$name $(( (ib - ia) / (ob - oa) ))"
}
