-- wrk: POST a purchase with the bearer token in $SECKILL_TOKEN.
wrk.method = "POST"
wrk.body = '{"quantity": 1}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("SECKILL_TOKEN")
