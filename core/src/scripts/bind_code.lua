-- Binds one code of the campaign's pool to an order, once: the same order always gets
-- the same code, and no code goes to two orders.
-- KEYS: pool (list), bound (hash order id -> code)
-- ARGV: order id
local c = redis.call('HGET', KEYS[2], ARGV[1])
if c then return c end
c = redis.call('LPOP', KEYS[1])
if not c then return false end
redis.call('HSET', KEYS[2], ARGV[1], c)
return c
