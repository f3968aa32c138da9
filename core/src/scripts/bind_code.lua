-- Binds codes of the campaign's pool to an order, one a unit, once: the same order always
-- gets the same codes, and no code goes to two orders. A pool with fewer codes left than
-- the order has units binds none.
-- KEYS: pool (list), bound (hash order id -> its codes, a line each)
-- ARGV: order id, units
-- Returns the codes, a line each, or nil when the pool is short.
local c = redis.call('HGET', KEYS[2], ARGV[1])
if c then return c end
local n = tonumber(ARGV[2])
if redis.call('LLEN', KEYS[1]) < n then return false end
c = table.concat(redis.call('LPOP', KEYS[1], n), '\n')
redis.call('HSET', KEYS[2], ARGV[1], c)
return c
