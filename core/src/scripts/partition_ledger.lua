-- What the ledger judges of one partition against its own counters, read at one instant:
-- its held, sold and transit counters, its buyers, its outgoing transfer log and the
-- units of each order its hold index names (0 for one no longer held). Read-only; it
-- holds Redis for about a microsecond a buyer and two a held order.
-- KEYS: part, buyers, holds, transfers out
-- ARGV: order key prefix
-- Returns {held, sold, transit, buyers (HGETALL), transfers out (HGETALL), held units}.
local part, buyers, holds, out = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local c = redis.call('HMGET', part, PART.held, PART.sold, PART.transit)
local units = {}
for n, oid in ipairs(redis.call('ZRANGE', holds, 0, -1)) do
  local o = redis.call('HMGET', ARGV[1] .. oid, ORDER.qty, ORDER.status)
  units[n] = (o[2] == 'held' and tonumber(o[1])) or 0
end
return {tonumber(c[1] or '0'), tonumber(c[2] or '0'), tonumber(c[3] or '0'),
  redis.call('HGETALL', buyers), redis.call('HGETALL', out), units}
