-- wrk: POST one payment webhook, signed beforehand, again and again: its headers and
-- body from $SECKILL_WEBHOOK_ID, $SECKILL_WEBHOOK_TS, $SECKILL_WEBHOOK_SIG and
-- $SECKILL_WEBHOOK_BODY.
wrk.method = "POST"
wrk.body = os.getenv("SECKILL_WEBHOOK_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["webhook-id"] = os.getenv("SECKILL_WEBHOOK_ID")
wrk.headers["webhook-timestamp"] = os.getenv("SECKILL_WEBHOOK_TS")
wrk.headers["webhook-signature"] = os.getenv("SECKILL_WEBHOOK_SIG")
