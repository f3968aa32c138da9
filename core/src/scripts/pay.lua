-- Pays a held order, once. Only the owner, only before its deadline.
-- KEYS: part, holds, events, order
-- ARGV: user, order id
-- Returns {'paid', paid_ms} (also when it was paid before), {'expired'}, {'not_found'}
local part, holds, events, order = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local o = redis.call('HMGET', order, ORDER.user, ORDER.qty, ORDER.status, ORDER.pay_by_ms,
  ORDER.paid_ms)
if not o[1] or o[1] ~= ARGV[1] then return {'not_found'} end
if o[3] == 'paid' or o[3] == 'delivered' then return {'paid', o[5]} end
if o[3] ~= 'held' then return {'expired'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= tonumber(o[4]) then return {'expired'} end
local qty = tonumber(o[2])
local paid = string.format('%d', now)
redis.call('HSET', order, ORDER.status, 'paid', ORDER.paid_ms, paid)
redis.call('HINCRBY', part, PART.held, -qty)
redis.call('HINCRBY', part, PART.sold, qty)
redis.call('ZREM', holds, ARGV[2])
redis.call('XADD', events, '*', EVENT.type, 'paid', EVENT.order_id, ARGV[2], EVENT.user, o[1],
  EVENT.qty, qty, EVENT.pay_by_ms, o[4], EVENT.paid_ms, paid)
return {'paid', paid}
