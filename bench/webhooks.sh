#!/usr/bin/env bash
# Payment webhooks a shard verifies per second: one webhook signed by the Standard
# Webhooks reference library, sent again and again (a provider's retry storm: each is
# verified, then answered its first answer by one script call); the same webhook with a
# bad signature (refused before Redis); beside a sold-out purchase on the same node.
# Alternating, several rounds, medians.
#
#   bench/webhooks.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} secs=${2:-5}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
cargo build --release -q -p seckill-dataplane
. bench/lib.sh
start_redis
sold_out_campaign
secret="whsec_$(head -c 32 /dev/urandom | base64)"
(umask 077 && echo "$secret" > "$work/webhook.secret")
dport=$(port)
: > "$work/empty.toml"
$bin/seckill-dataplane serve --config "$work/empty.toml" --listen "127.0.0.1:$dport" --admin-listen "" \
    --redis "$node_redis" --redis-password-file "$node_password_file" --shards 1 --no-worker \
    --demo-issuer --payment-webhook-secret-file "$work/webhook.secret" \
    --secret-file "$work/secret" 2>>"$work/serve.log" &
pids+=($!)
wait_http "http://127.0.0.1:$dport"
first=$(token "http://127.0.0.1:$dport" first)
answer=$(curl -s -XPOST "http://127.0.0.1:$dport/api/campaigns/bench/purchase" -H "Authorization: Bearer $first")
echo "purchase: $answer"
order=$(echo "$answer" |
  python3 -c 'import sys,json; print(json.load(sys.stdin)["order_id"])')
SECKILL_TOKEN=$(token "http://127.0.0.1:$dport" crowd)
export SECKILL_TOKEN
# The webhook, signed as a provider signs it (valid five minutes: a round stays within).
eval "$(python3 - "$secret" "$order" <<'PY'
import json, shlex, sys
from datetime import datetime, timezone
from standardwebhooks import Webhook
secret, order = sys.argv[1:3]
body = json.dumps({"type": "payment.succeeded", "timestamp": "2026-12-08T00:00:00Z",
    "data": {"order_id": order, "amount_cents": 1, "currency": "EUR", "payment_id": "pi_bench"}})
now = datetime.now(tz=timezone.utc)
sig = Webhook(secret).sign("msg_bench", now, body)
for k, v in [("ID", "msg_bench"), ("TS", str(int(now.timestamp()))), ("SIG", sig), ("BODY", body)]:
    print(f"export SECKILL_WEBHOOK_{k}={shlex.quote(v)}")
PY
)"
curl -s -XPOST "http://127.0.0.1:$dport/api/payments/webhook" -H "webhook-id: $SECKILL_WEBHOOK_ID" \
  -H "webhook-timestamp: $SECKILL_WEBHOOK_TS" -H "webhook-signature: $SECKILL_WEBHOOK_SIG" \
  -d "$SECKILL_WEBHOOK_BODY"; echo
rate() {
  wrk -t1 -c64 -d"${secs}s" -s "$1" "http://127.0.0.1:$dport$2" 2>/dev/null |
    awk '/Requests\/sec/ {printf "%.0f", $2}'
}
declare -A runs
for _ in $(seq "$rounds"); do
  runs[webhook]+="$(rate bench/webhook.lua /api/payments/webhook) "
  runs[purchase]+="$(rate bench/purchase.lua /api/campaigns/bench/purchase) "
  runs[forged]+="$(SECKILL_WEBHOOK_SIG="v1,$(head -c 32 /dev/urandom | base64)" rate bench/webhook.lua /api/payments/webhook) "
done
printf 'payment webhooks, 1 shard, wrk -t1 -c64 -d%ss, %s rounds, median requests/s\n' "$secs" "$rounds"
p=$(echo "${runs[purchase]}" | median)
for k in webhook forged purchase; do
  m=$(echo "${runs[$k]}" | median)
  printf '  %-9s %8s/s  (%.2fx a sold-out purchase)   runs: %s\n' "$k" "$m" "$(echo "$m $p" | awk '{print $1/$2}')" "${runs[$k]}"
done
echo "(webhook: verified and answered its first answer; forged: refused 401 before Redis)"
