-- Takes one event of the payment provider for an order, once per webhook and once per
-- payment: a payment that pays a held order in time and to the cent, money owed back
-- for one that came after the hold expired or after another payment, a pending
-- payment's grace for the hold, a failure that ends it, a refund done.
-- KEYS: part, holds, buyers, events, order, payments, webhooks
-- ARGV: webhook id, kind (succeeded, pending, failed or refunded), order id, payment id,
--       amount (minor units), currency, the campaign's unit price, its currency, the
--       grace a pending payment gives (ms)
-- Returns {what it did, the order's status, paid_ms, replicas}: what it did is `paid`,
-- `refund_due`, `mismatch`, `pending`, `failed`, `refunded` or `ignored` (the first
-- answer again for a webhook seen before); `unmatched` for an order that does not exist;
-- `retry` for a hold past its deadline on a partition lent to a shard (its unit comes
-- back with the lease). Replicas: how many the master has, for the caller's `WAIT`.
local part, holds, buyers, events, order, payments, webhooks =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local wid, kind, oid, pid = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local amount, currency = tonumber(ARGV[5]), ARGV[6]
local info = redis.call('INFO', 'replication')
local replicas = tonumber(string.match(info, 'connected_slaves:(%d+)') or '0')

local first = redis.call('HGET', webhooks, wid)
if first then
  local a = cjson.decode(first)
  return {a[1], a[2], a[3], replicas}
end
local o = redis.call('HMGET', order, ORDER.user, ORDER.qty, ORDER.status, ORDER.pay_by_ms,
  ORDER.hold_by_ms)
if not o[1] then return {'unmatched', 'absent', '0', replicas} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_s = string.format('%d', now)
local user, qty, status = o[1], tonumber(o[2]), o[3]

-- Remembers what this webhook did, and answers it.
local function answer(what)
  local a = redis.call('HMGET', order, ORDER.status, ORDER.paid_ms)
  local reply = {what, a[1], a[2] or '0'}
  redis.call('HSET', webhooks, wid, cjson.encode(reply))
  return {reply[1], reply[2], reply[3], replicas}
end
local rec = redis.call('HGET', payments, pid)
rec = rec and cjson.decode(rec)
local function record(state, reason)
  redis.call('HSET', payments, pid, cjson.encode({order_id = oid, payment_id = pid,
    amount_cents = ARGV[5], currency = currency, status = state, reason = reason or '',
    ms = now_s}))
end
local function log(type, extra)
  local f = {EVENT.type, type, EVENT.order_id, oid, EVENT.user, user, EVENT.qty, qty,
    EVENT.payment_id, pid, EVENT.amount_cents, ARGV[5], EVENT.currency, currency}
  for _, v in ipairs(extra) do f[#f + 1] = v end
  redis.call('XADD', events, '*', unpack(f))
end
-- Money owed back for this payment: kept with the order and told to the workers.
local function owe(reason)
  record('refund_due', reason)
  local r = redis.call('HGET', order, ORDER.refunds)
  redis.call('HSET', order, ORDER.refunds, r and (r .. ' ' .. pid) or pid)
  log('refund_due', {EVENT.reason, reason, EVENT.status,
    redis.call('HGET', order, ORDER.status)})
  return answer('refund_due')
end

if kind == 'succeeded' then
  if rec and rec.status ~= 'pending' and rec.status ~= 'failed' then
    return answer(rec.status)
  end
  if currency ~= ARGV[8] then
    record('mismatch', 'currency')
    return answer('mismatch')
  end
  if amount ~= tonumber(ARGV[7]) * qty then
    record('mismatch', 'amount')
    return answer('mismatch')
  end
  if status == 'held' then
    if now < tonumber(o[4]) then
      redis.call('HSET', order, ORDER.status, 'paid', ORDER.paid_ms, now_s, ORDER.payment_id,
        pid, ORDER.amount_cents, ARGV[5], ORDER.currency, currency)
      redis.call('HINCRBY', part, PART.held, -qty)
      redis.call('HINCRBY', part, PART.sold, qty)
      redis.call('ZREM', holds, oid)
      record('paid')
      log('paid', {EVENT.pay_by_ms, o[4], EVENT.paid_ms, now_s})
      return answer('paid')
    end
    -- Past its deadline and not yet released: released here, as release.lua does,
    -- unless the partition is lent (then its unit is the shard's until the lease ends).
    if now < tonumber(redis.call('HGET', part, PART.lease_ms) or '0') then
      return {'retry', status, '0', replicas}
    end
    redis.call('HSET', order, ORDER.status, 'expired', ORDER.expired_ms, now_s)
    redis.call('HINCRBY', part, PART.held, -qty)
    redis.call('HINCRBY', part, PART.stock, qty)
    redis.call('HINCRBY', part, PART.inflow, 1)
    if redis.call('HINCRBY', buyers, user, -qty) <= 0 then redis.call('HDEL', buyers, user) end
    redis.call('ZREM', holds, oid)
    redis.call('XADD', events, '*', EVENT.type, 'expired', EVENT.order_id, oid, EVENT.user, user,
      EVENT.qty, qty, EVENT.pay_by_ms, o[4], EVENT.expired_ms, now_s)
    status = 'expired'
  end
  if status == 'expired' or status == 'refund_due' or status == 'refunded' then
    redis.call('HSET', order, ORDER.status, 'refund_due')
    return owe('expired')
  end
  return owe('duplicate')
end

if kind == 'pending' then
  if rec then return answer(rec.status == 'pending' and 'pending' or 'ignored') end
  record('pending')
  if status == 'held' and now < tonumber(o[4]) and not o[5] then
    local grace = tonumber(o[4]) + tonumber(ARGV[9])
    redis.call('HSET', order, ORDER.pay_by_ms, string.format('%d', grace), ORDER.hold_by_ms, o[4])
    redis.call('ZADD', holds, grace, oid)
  end
  return answer('pending')
end

if kind == 'failed' then
  if rec and rec.status ~= 'pending' then return answer('ignored') end
  record('failed')
  if status == 'held' and o[5] then
    redis.call('HSET', order, ORDER.pay_by_ms, o[5])
    redis.call('HDEL', order, ORDER.hold_by_ms)
    redis.call('ZADD', holds, tonumber(o[5]), oid)
  end
  return answer('failed')
end

-- refunded: money owed back has gone back. A refund of the payment that paid a unit is
-- the shop's own business (the unit stays sold): ignored here.
if not rec or rec.status ~= 'refund_due' then return answer('ignored') end
record('refunded', rec.reason)
if status == 'refund_due' then
  local due = false
  for p in string.gmatch(redis.call('HGET', order, ORDER.refunds) or '', '%S+') do
    local r = redis.call('HGET', payments, p)
    if r and cjson.decode(r).status == 'refund_due' then due = true end
  end
  if not due then redis.call('HSET', order, ORDER.status, 'refunded') end
end
log('refunded', {EVENT.reason, rec.reason, EVENT.status, redis.call('HGET', order, ORDER.status)})
return answer('refunded')
