-- One purchase on one stock partition, atomically.
-- KEYS: part, buyers, holds, events, [idempotency record]
-- ARGV: user, quantity, campaign id, partition, order key prefix, idempotency ttl (s),
--       ticket-used key ('' when the campaign needs no ticket), its ttl (s),
--       and for a waiting room's pass: the partition's pass log, the pass's expiry (ms)
-- Returns {outcome, ...}:
--   {'held', order_id, pay_by_ms}      a unit is held (also the replay of an earlier key)
--   {'dry', stock}                      this partition cannot serve the quantity
--   {'limit_reached', have}
--   {'not_started', starts_at_ms} | {'ended'} | {'paused'} | {'unknown'} | {'ticket_used'}
--   {'ticket_expired'}                  the pass ran out by this partition's clock
--   {'pass_required'}                   the campaign sells through a waiting room
local part, buyers, holds, events, idem = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local user, qty = ARGV[1], tonumber(ARGV[2])
local oprefix = ARGV[5]

if idem then
  local prev = redis.call('GET', idem)
  if prev then
    return {'held', prev, redis.call('HGET', oprefix .. prev, 'pay_by_ms') or '0'}
  end
end

local m = redis.call('HMGET', part, 'state', 'starts_at_ms', 'ends_at_ms', 'limit', 'hold_ttl_ms', 'stock',
  'queued')
local state = m[1]
if not state then return {'unknown'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if state == 'ended' then return {'ended'} end
if state == 'paused' then return {'paused'} end
if state ~= 'live' then return {'not_started', m[2]} end
local starts, ends = tonumber(m[2]), tonumber(m[3])
if starts > 0 and now < starts then return {'not_started', m[2]} end
if ends > 0 and now >= ends then return {'ended'} end

local ticket, pass_log = ARGV[7], ARGV[9]
if ticket ~= '' and redis.call('EXISTS', ticket) == 1 then return {'ticket_used'} end
if pass_log and now >= tonumber(ARGV[10]) then return {'ticket_expired'} end
if m[7] == '1' and not pass_log then return {'pass_required'} end

local have = tonumber(redis.call('HGET', buyers, user) or '0')
if have + qty > tonumber(m[4]) then return {'limit_reached', have} end
local stock = tonumber(m[6])
if stock < qty then return {'dry', stock} end

redis.call('HINCRBY', part, 'stock', -qty)
redis.call('HINCRBY', part, 'held', qty)
redis.call('HINCRBY', buyers, user, qty)
local seq = redis.call('HINCRBY', part, 'seq', 1)
local oid = ARGV[3] .. '.' .. ARGV[4] .. '.' .. seq
local pay_by = string.format('%d', now + tonumber(m[5]))
redis.call('HSET', oprefix .. oid, 'user', user, 'qty', qty, 'status', 'held',
  'pay_by_ms', pay_by, 'created_ms', string.format('%d', now))
redis.call('ZADD', holds, pay_by, oid)
if idem then redis.call('SET', idem, oid, 'EX', ARGV[6]) end
if ticket ~= '' then redis.call('SET', ticket, oid, 'EX', ARGV[8]) end
if pass_log then redis.call('RPUSH', pass_log, user) end
redis.call('XADD', events, '*', 'type', 'held', 'order_id', oid, 'user', user,
  'qty', qty, 'pay_by_ms', pay_by)
return {'held', oid, pay_by}
