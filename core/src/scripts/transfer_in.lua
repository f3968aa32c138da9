-- Second step: the target applies a logged transfer, once, whoever replays it; not while
-- the target is lent to a shard (lease.lua): then it only asks for the lease to end.
-- KEYS: target part, target applied set
-- ARGV: transfer id, units
-- Returns 1 when applied now, 0 when applied before, -1 when it must wait for the lease.
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
local l = redis.call('HMGET', KEYS[1], PART.lease_ms, PART.returning)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(l[1] or '0') then
  if l[2] ~= '1' then redis.call('HSET', KEYS[1], PART.returning, 1) end
  return -1
end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], PART.stock, tonumber(ARGV[2]))
redis.call('HINCRBY', KEYS[1], PART.inflow, 1)
if l[2] == '1' then redis.call('HSET', KEYS[1], PART.returning, 0) end
return 1
