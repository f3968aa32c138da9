# Sourced by the bench scripts: a scratch dir removed at exit with every process started,
# free ports, a throwaway redis-server with the managed Redis's users, nginx `return 200`,
# and the sold-out campaign every request of which ends on the shard.

# The release binaries, wherever cargo puts them (unless the script chose other ones).
bin=${bin:-"${CARGO_TARGET_DIR:-target}/release"}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The nodes' HMAC secret (44 bytes): private from the start, as a node refuses a secret
# file its group or others may read.
(umask 077 && head -c 32 /dev/urandom | base64 > "$work/secret")
# The shop: an Ed25519 key ($shop_key, the private key, its name the kid) made here with
# Python's cryptography, and its JWKS, which every node started from here reads
# (SECKILL_JWKS_FILE, SECKILL_TOKEN_ISSUER); the simulator signs its shoppers' tokens with
# it when told --token-key "$shop_key".
mkdir -p "$work/shop"
shop_key="$work/shop/bench-shop.pem"
python3 - "$shop_key" "$work/shop/jwks.json" <<'PY'
import base64, json, os, sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
key = ed25519.Ed25519PrivateKey.generate()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption()))
os.close(fd)
x = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
jwk = {"kty": "OKP", "crv": "Ed25519", "x": base64.urlsafe_b64encode(x).rstrip(b"=").decode(),
       "kid": "bench-shop", "use": "sig", "alg": "EdDSA"}
json.dump({"keys": [jwk]}, open(sys.argv[2], "w"))
PY
export SECKILL_JWKS_FILE="$work/shop/jwks.json" SECKILL_TOKEN_ISSUER="https://shop.bench"
# Buyers pay through the demo provider: the node signs each payment's webhook to itself
# and takes it as the provider's (loopback nodes only).
export SECKILL_DEMO_PAYMENTS=true

# make_users: the managed Redis's ACL users (scripts/redis-users.sh) in $work/users, so
# the bench logs in as production does: the default user off, nodes and order workers
# as seckill-node, the CLI and the simulator as seckill-ops, redis-cli as seckill-admin
# (rcli). Passwords stay in their files (mode 0600), never on a command line: programs
# read them with --redis-password-file, redis-cli from REDISCLI_AUTH. Run again, it
# keeps the passwords. Sets and exports node_password_file and ops_password_file.
make_users() {
  scripts/redis-users.sh "$work/users"
  export node_password_file="$work/users/node.password" ops_password_file="$work/users/ops.password"
  REDISCLI_AUTH=$(cat "$work/users/admin.password")
  export REDISCLI_AUTH
}
# rcli ARGS...: redis-cli as the maintenance user (DEBUG, CONFIG, INFO are beyond the others).
rcli() { redis-cli --user seckill-admin "$@"; }
# redis_urls PORT: sets and exports the URLs by which programs log in to the Redis on PORT:
# node_redis (nodes, order workers) and ops_redis (the CLI, the simulator).
redis_urls() {
  export node_redis="redis://seckill-node@127.0.0.1:$1" ops_redis="redis://seckill-ops@127.0.0.1:$1"
}

# start_redis [OPTION...]: a redis-server without persistence (redis-server options given
# override that) with the users of make_users; sets rport, node_redis and ops_redis. Its
# --aclfile is absolute ($work is), as redis-server reads it after changing to --dir.
start_redis() {
  rport=$(port)
  make_users
  redis_urls "$rport"
  ${LOAD_PIN[@]+"${LOAD_PIN[@]}"} redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
      --aclfile "$work/users/users.acl" "$@" >/dev/null &
  pids+=($!)
  for _ in $(seq 50); do rcli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

# start_nginx WORKERS: nginx `return 200` with that many workers; sets nport.
start_nginx() {
  nport=$(port)
  cat > "$work/nginx.conf" <<NGINX
worker_processes $1;
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
}

wait_http() { for _ in $(seq 100); do curl -sf "$1/api/time" >/dev/null 2>&1 && break; sleep 0.1; done; }

# token URL USER: a shopper's token from the demo issuer (the node needs --demo-issuer).
token() { curl -s -XPOST "$1/api/session" -d "{\"user_id\":\"$2\"}" | python3 -c 'import sys,json; print(json.load(sys.stdin)["token"])'; }

# open_campaign ID TOTAL PARTITIONS: creates, arms and starts a campaign in $ops_redis
# (one unit per buyer, an hour to pay).
open_campaign() {
  cat > "$work/$1.toml" <<TOML
id = "$1"
name = "$1"
total = $2
partitions = $3
per_user_limit = 1
hold_ttl_s = 3600
price_cents = 1
TOML
  local c=($bin/seckill-dataplane campaign --redis "$ops_redis" --redis-password-file "$ops_password_file")
  "${c[@]}" create --file "$work/$1.toml" >/dev/null
  "${c[@]}" arm "$1" >/dev/null
  "${c[@]}" start "$1" >/dev/null
}

# limits SETTING=VALUE...: sets those limits in $ops_redis and gives the nodes half a
# second to read them.
limits() {
  $bin/seckill-dataplane limits --redis "$ops_redis" --redis-password-file "$ops_password_file" set "$@" >/dev/null
  sleep 0.5
}

# no_limits: every rate limit, the automatic blocking and admission off, in $ops_redis.
no_limits() {
  $bin/seckill-dataplane limits --redis "$ops_redis" --redis-password-file "$ops_password_file" \
      set ip_rate=0 user_rate=0 auto_block_refusals=0 admission_rate=0 >/dev/null
}

# upcoming_campaign: campaign "later", started but with its opening a day away, so every
# purchase of it is refused as not started (425).
upcoming_campaign() {
  cat > "$work/later.toml" <<TOML
id = "later"
name = "later"
total = 1000
partitions = 1
per_user_limit = 1
hold_ttl_s = 3600
price_cents = 1
starts_at = "$(date -u -d tomorrow +%Y-%m-%dT%H:%M:%SZ)"
TOML
  local c=($bin/seckill-dataplane campaign --redis "$ops_redis" --redis-password-file "$ops_password_file")
  "${c[@]}" create --file "$work/later.toml" >/dev/null
  "${c[@]}" arm later >/dev/null
  "${c[@]}" start later >/dev/null
}

# sold_out_campaign: campaign "bench" with one unit, open, and the limits lifted.
sold_out_campaign() {
  open_campaign bench 1 1
  no_limits
  sleep 0.5
}

# buy_the_unit URL: the one unit goes (if still there), and SECKILL_TOKEN is a shopper
# whose purchases all end "sold out".
buy_the_unit() {
  local first
  first=$(token "$1" first)
  curl -s -XPOST "$1/api/campaigns/bench/purchase" -H "Authorization: Bearer $first" >/dev/null
  SECKILL_TOKEN=$(token "$1" crowd)
  export SECKILL_TOKEN
  sleep 0.6
}

# shopper_tokens FILE N PREFIX: N tokens of shoppers not seen before (PREFIX and a
# number), signed here as the shop signs them (PyJWT, the shop's key $shop_key).
shopper_tokens() {
  python3 - "$shop_key" "$@" <<'PY'
import sys, time
import jwt
from cryptography.hazmat.primitives import serialization
keyfile, out, n, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
key = serialization.load_pem_private_key(open(keyfile, "rb").read(), password=None)
now = int(time.time())
with open(out, "w") as f:
    for i in range(n):
        claims = {"sub": f"{prefix}{i:011d}", "iss": "https://shop.bench", "aud": "seckill",
                  "iat": now, "exp": now + 86_400}
        f.write(jwt.encode(claims, key, algorithm="EdDSA", headers={"kid": "bench-shop"}) + "\n")
PY
}

# new_shoppers_script FILE: a wrk script that POSTs a purchase of $QTY units on
# $BUY_PATH, each request a shopper of the file $TOKENS in turn, with an
# Idempotency-Key (the requests built once, at the start). One run goes on from the
# shopper after the last one the run before it sent (kept in $TOKENS.next), so that no
# run repeats another's purchases.
new_shoppers_script() {
  cat > "$1" <<'LUA'
local requests, threads = {}, {}
i = 0
function setup(thread)
  table.insert(threads, thread)
end
function init(args)
  local body = '{"quantity": ' .. os.getenv("QTY") .. '}'
  for token in io.lines(os.getenv("TOKENS")) do
    requests[#requests + 1] = wrk.format("POST", os.getenv("BUY_PATH"), {
      ["Content-Type"] = "application/json",
      ["Authorization"] = "Bearer " .. token,
      ["Idempotency-Key"] = "k",
    }, body)
  end
  local f = io.open(os.getenv("TOKENS") .. ".next")
  if f then i = tonumber(f:read("*l")) or 0; f:close() end
end
function done()
  local f = io.open(os.getenv("TOKENS") .. ".next", "w")
  f:write(tostring(threads[1]:get("i")), "\n")
  f:close()
end
LUA
  wrk_cycle >> "$1"
}

# known_shoppers_script FILE: a wrk script that shows the node each shopper of $TOKENS
# once (GET /api/orders/none.0.0 with their token, which the shard verifies and keeps),
# and stops when every one has been answered.
known_shoppers_script() {
  cat > "$1" <<'LUA'
local requests, answered = {}, 0
i = 0
function init(args)
  for token in io.lines(os.getenv("TOKENS")) do
    requests[#requests + 1] = wrk.format("GET", "/api/orders/none.0.0",
      { ["Authorization"] = "Bearer " .. token })
  end
end
function response()
  answered = answered + 1
  if answered >= #requests then wrk.thread:stop() end
end
LUA
  wrk_cycle >> "$1"
}

# wrk_cycle: the wrk request function of a script that built its requests in init into
# `requests`: each call sends the next one, round and round.
wrk_cycle() {
  cat <<'LUA'
function request()
  i = i % #requests + 1
  return requests[i]
end
LUA
}

# cpu_ticks PID: the CPU time (user and system), in clock ticks, of a process, its threads
# and its child processes (nginx's workers), so far.
cpu_ticks() {
  local t=0 p v
  for p in "$1" $(pgrep -P "$1"); do
    v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || true)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# flat_out_scenario FILE TARGET_URL REDIS CAMPAIGN SECONDS [CONNECTIONS]: a simulator
# scenario that sends purchases as fast as CONNECTIONS (64) connections allow, each from
# a shopper not seen before, on an existing campaign; REDIS is an ops URL (its password
# is $ops_password_file).
flat_out_scenario() {
  cat > "$1" <<TOML
target = "$2"
redis = "$3"
redis_password_file = "$ops_password_file"
token_key = "$shop_key"
token_issuer = "https://shop.bench"
duration_s = $5
threads = 1
connections = ${6:-64}
[campaign]
id = "$4"
[arrivals]
profile = "constant"
rate = 250000
[population]
users = 400000
addresses = 1
[personas]
shopper = 1
TOML
}

# launch_node SHARDS: a node for the launch scenario (its worker and order store in
# $work, the demo's content file, per-IP limits of 50/s) on a fresh port, its admin
# listener (/metrics) on another; sets dport, aport and node.
launch_node() {
  dport=$(port) aport=$(port)
  mkdir -p "$work/content"
  [ -s "$work/content/midnight-sessions.zip" ] || head -c 65536 /dev/urandom > "$work/content/midnight-sessions.zip"
  cat > "$work/dp.toml" <<TOML
content_dir = "$work/content"
[admin]
listen = "127.0.0.1:$aport"
[worker]
db = "$work/orders.sqlite"
[limits]
ip_rate = 50
ip_burst = 100
TOML
  ${NODE_PIN[@]+"${NODE_PIN[@]}"} $bin/seckill-dataplane serve --config "$work/dp.toml" --listen "127.0.0.1:$dport" \
      --redis "$node_redis" --redis-password-file "$node_password_file" --shards "$1" \
      --secret-file "$work/secret" ${NODE_PIN[@]+--no-pin} 2>"$work/dataplane.log" &
  node=$!
  pids+=($node)
  wait_http "http://127.0.0.1:$dport"
}
