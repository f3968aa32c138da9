-- Purchases on one stock partition, one after the other, atomically: one call carries
-- every purchase a shard has waiting for the partition, and answers each as if it had
-- been a call of its own, in the order given.
-- KEYS: part, buyers, holds, events, once, pass log
-- ARGV: campaign id, partition, order key prefix, then 5 per purchase:
--       user, quantity, idempotency key ('' for none), ticket id ('' for none),
--       the waiting room pass's expiry (ms; '' when the ticket is no pass)
-- Returns 3 items per purchase, in order:
--   'held', order_id, pay_by_ms        a unit is held (also the replay of an earlier key)
--   'dry', stock, ''                   this partition cannot serve the quantity
--   'limit_reached', have, ''
--   'not_started', starts_at_ms, ''  | 'ended' | 'paused' | 'unknown' | 'ticket_used'
--   'ticket_expired'                   the pass ran out by this partition's clock
--   'pass_required'                    the campaign sells through a waiting room
--   'layout', found, ''                the partition was armed with another key layout
-- The call's orders go to the worker as one `held` event: `orders`, a line
-- `<order_id> <user> <qty> <pay_by_ms>` an order (ids and users have no spaces).
-- `once` holds `first_answer_field(user, key)` (an Idempotency-Key's first answer) and
-- `ticket_field(ticket)` (a ticket's use), each → order id: written only with an order,
-- so bounded by them. Fields, the layout and the order id's form come from the prelude
-- (see scripts.rs), generated from keys.rs.
local part, buyers, holds, events, once, log = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local campaign, partition, oprefix = ARGV[1], ARGV[2], ARGV[3]
local n = (#ARGV - 3) / 5
local out = {}

local function answer(i, a, b, c)
  out[3 * i - 2], out[3 * i - 1], out[3 * i] = a, b or '', c or ''
end

local m = redis.call('HMGET', part, PART.state, PART.starts_at_ms, PART.ends_at_ms, PART.limit,
  PART.hold_ttl_ms, PART.stock, PART.queued, PART.held, PART.seq, PART.layout)
local state = m[1]

-- What the idempotency keys and tickets already name, and what the buyers already have.
local fields, users, seen = {}, {}, {}
for i = 1, n do
  local a = 3 + 5 * (i - 1)
  if ARGV[a + 3] ~= '' then fields[#fields + 1] = first_answer_field(ARGV[a + 1], ARGV[a + 3]) end
  if ARGV[a + 4] ~= '' then fields[#fields + 1] = ticket_field(ARGV[a + 4]) end
  if not seen[ARGV[a + 1]] then
    seen[ARGV[a + 1]] = true
    users[#users + 1] = ARGV[a + 1]
  end
end
local named = {}
if #fields > 0 then
  local v = redis.call('HMGET', once, unpack(fields))
  for j = 1, #fields do
    if v[j] then named[fields[j]] = v[j] end
  end
end

local refusal
local now = 0
if not state then
  refusal = {'unknown'}
elseif m[10] ~= LAYOUT then
  refusal = {'layout', m[10] or '1'}
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local starts, ends = tonumber(m[2]), tonumber(m[3])
  if state == 'ended' then refusal = {'ended'}
  elseif state == 'paused' then refusal = {'paused'}
  elseif state ~= 'live' or (starts > 0 and now < starts) then refusal = {'not_started', m[2]}
  elseif ends > 0 and now >= ends then refusal = {'ended'}
  end
end

local have = {}
if not refusal then
  local v = redis.call('HMGET', buyers, unpack(users))
  for j = 1, #users do have[users[j]] = tonumber(v[j] or '0') end
end

local limit, ttl, queued = tonumber(m[4]), tonumber(m[5]), m[7] == '1'
local stock, held, seq = tonumber(m[6]), tonumber(m[8]), tonumber(m[9])
local orders, pay_by_of, counts, new_once, new_holds, passes = {}, {}, {}, {}, {}, {}
for i = 1, n do
  local a = 3 + 5 * (i - 1)
  local user, qty, key, ticket, pass = ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
  local ikey = key ~= '' and first_answer_field(user, key)
  local tkey = ticket ~= '' and ticket_field(ticket)
  local first = ikey and named[ikey]
  if first then
    -- An order of this same call answers from what is about to be written.
    answer(i, 'held', first, pay_by_of[first] or redis.call('HGET', oprefix .. first, ORDER.pay_by_ms) or '0')
  elseif refusal then
    answer(i, refusal[1], refusal[2])
  elseif tkey and named[tkey] then
    answer(i, 'ticket_used')
  elseif pass ~= '' and now >= tonumber(pass) then
    answer(i, 'ticket_expired')
  elseif queued and pass == '' then
    answer(i, 'pass_required')
  elseif have[user] + qty > limit then
    answer(i, 'limit_reached', have[user])
  elseif stock < qty then
    answer(i, 'dry', stock)
  else
    stock, held, seq = stock - qty, held + qty, seq + 1
    have[user] = have[user] + qty
    counts[user] = have[user]
    local oid = order_id(campaign, partition, seq)
    local pay_by = string.format('%d', now + ttl)
    orders[#orders + 1] = {oid, user, qty, pay_by}
    pay_by_of[oid] = pay_by
    new_holds[#new_holds + 1] = pay_by
    new_holds[#new_holds + 1] = oid
    if ikey then
      named[ikey] = oid
      new_once[#new_once + 1] = ikey
      new_once[#new_once + 1] = oid
    end
    if tkey then
      named[tkey] = oid
      new_once[#new_once + 1] = tkey
      new_once[#new_once + 1] = oid
    end
    if pass ~= '' then passes[#passes + 1] = user end
    answer(i, 'held', oid, pay_by)
  end
end

if #orders > 0 then
  local flat = {}
  for _, u in ipairs(users) do
    if counts[u] then
      flat[#flat + 1] = u
      flat[#flat + 1] = counts[u]
    end
  end
  redis.call('HSET', part, PART.stock, stock, PART.held, held, PART.seq, seq)
  redis.call('HSET', buyers, unpack(flat))
  redis.call('ZADD', holds, unpack(new_holds))
  if #new_once > 0 then redis.call('HSET', once, unpack(new_once)) end
  if #passes > 0 then redis.call('RPUSH', log, unpack(passes)) end
  local created, lines = string.format('%d', now), {}
  for j, o in ipairs(orders) do
    redis.call('HSET', oprefix .. o[1], ORDER.user, o[2], ORDER.qty, o[3], ORDER.status, 'held',
      ORDER.pay_by_ms, o[4], ORDER.created_ms, created)
    lines[j] = o[1] .. ' ' .. o[2] .. ' ' .. o[3] .. ' ' .. o[4]
  end
  redis.call('XADD', events, '*', EVENT.type, 'held', EVENT.orders, table.concat(lines, '\n'))
end
return out
