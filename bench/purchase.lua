-- wrk: POST a purchase with the bearer token in $SECKILL_TOKEN, and the Idempotency-Key
-- in $SECKILL_IDEMPOTENCY_KEY when it is set.
wrk.method = "POST"
wrk.body = '{"quantity": 1}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("SECKILL_TOKEN")
local key = os.getenv("SECKILL_IDEMPOTENCY_KEY")
if key then
  wrk.headers["Idempotency-Key"] = key
end
