-- Releases holds past their deadline: each unit returns to the partition's stock and the
-- buyer may try again. A no-op for an order that is no longer held (paid in time). Not
-- while the partition is lent to a shard (lease.lua): then it only asks for the lease to
-- end, and the next call releases them.
-- KEYS: part, holds, buyers, events
-- ARGV: order key prefix, most orders to release in one call
-- Returns the number of orders released.
local part, holds, buyers, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', holds, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local l = redis.call('HMGET', part, PART.lease_ms, PART.returning)
if now < tonumber(l[1] or '0') then
  if #due > 0 and l[2] ~= '1' then redis.call('HSET', part, PART.returning, 1) end
  return 0
end
if l[2] == '1' then redis.call('HSET', part, PART.returning, 0) end
local released = 0
for _, oid in ipairs(due) do
  local key = ARGV[1] .. oid
  local o = redis.call('HMGET', key, ORDER.user, ORDER.qty, ORDER.status, ORDER.pay_by_ms)
  if o[3] == 'held' and tonumber(o[4]) <= now then
    local qty = tonumber(o[2])
    redis.call('HSET', key, ORDER.status, 'expired', ORDER.expired_ms, string.format('%d', now))
    redis.call('HINCRBY', part, PART.held, -qty)
    redis.call('HINCRBY', part, PART.stock, qty)
    redis.call('HINCRBY', part, PART.inflow, 1)
    if redis.call('HINCRBY', buyers, o[1], -qty) <= 0 then redis.call('HDEL', buyers, o[1]) end
    redis.call('XADD', events, '*', EVENT.type, 'expired', EVENT.order_id, oid, EVENT.user, o[1],
      EVENT.qty, qty, EVENT.pay_by_ms, o[4], EVENT.expired_ms, string.format('%d', now))
    released = released + 1
  end
  redis.call('ZREM', holds, oid)
end
return released
