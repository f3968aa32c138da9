-- Last step: the source forgets a transfer the target has applied.
-- KEYS: source part, source outgoing log
-- ARGV: transfer id
local v = redis.call('HGET', KEYS[2], ARGV[1])
if not v then return 0 end
local n = tonumber(string.match(v, '^%d+:(%d+):'))
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], PART.transit, -n)
return 1
