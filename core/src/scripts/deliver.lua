-- Marks a paid order delivered with its licence keys, one a unit, once.
-- KEYS: order, events
-- ARGV: order id, the licence keys (a line each)
-- Returns {'delivered', the keys, paid_ms, delivered_ms, first time? 1 : 0} or
-- {'not_paid', status}
local order, events = KEYS[1], KEYS[2]
local o = redis.call('HMGET', order, ORDER.status, ORDER.license_keys, ORDER.paid_ms,
  ORDER.delivered_ms, ORDER.user, ORDER.qty, ORDER.license_key)
if o[1] == 'delivered' then return {'delivered', o[2] or o[7], o[3], o[4], 0} end
if o[1] ~= 'paid' then return {'not_paid', o[1] or 'absent'} end
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local first = string.match(ARGV[2], '^[^\n]*')
redis.call('HSET', order, ORDER.status, 'delivered', ORDER.license_key, first,
  ORDER.license_keys, ARGV[2], ORDER.delivered_ms, now)
redis.call('XADD', events, '*', EVENT.type, 'delivered', EVENT.order_id, ARGV[1], EVENT.user, o[5],
  EVENT.qty, o[6], EVENT.paid_ms, o[3], EVENT.delivered_ms, now, EVENT.license_key, first,
  EVENT.license_keys, ARGV[2])
return {'delivered', ARGV[2], o[3], now, 1}
