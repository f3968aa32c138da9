-- A shopper's place in a campaign's waiting room: joins it (once) or looks it up.
-- Before the opening a joiner enters the pre-queue with a draw that stays secret until
-- then: SHA-1 of the room's seed and the user, cut to 52 bits. At the opening (the first
-- join or admission that finds the campaign live and past `starts_at`) the pre-queue is
-- closed and its order by draw becomes the line; later joiners queue behind it in turn.
-- The seed's SHA-1 is kept beside it from the first join: shown before the opening, it
-- commits the room to a seed nobody can swap for a better one afterwards.
-- KEYS: meta, pre, post, joined, admitted (see QueueKeys)
-- ARGV: 'join' | 'look', user, a fresh random seed (kept only by the room's first join)
-- Returns {kind, place, pass expiry ms, admitted so far, sold out ('1' | '0')}, kind one of
--   'pre' (place 0: not drawn yet), 'waiting', 'admitted', 'not_joined', 'ended', 'unknown'
local meta, pre, post, joined, admitted = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local user = ARGV[2]
local m = redis.call('HMGET', meta, META.state, META.starts_at_ms, META.drawn_ms, META.pre,
  META.admitted, META.sold_out, META.seq, META.ends_at_ms)
local state = m[1]
if not state or state == 'draft' or state == 'arming' then return {'unknown'} end
if state == 'ended' then return {'ended'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = tonumber(m[8]) or 0
if ends > 0 and now >= ends then return {'ended'} end
local drawn
drawn, m[4] = draw_at_opening(meta, pre, state, tonumber(m[2]) or 0, m[3], m[4], now)
local done = tonumber(m[5]) or 0
local sold = m[6] or '0'
local function answer(kind, place, expiry)
  return {kind, place, expiry, done, sold}
end

local pass = redis.call('HGET', admitted, user)
if pass then
  local sep = string.find(pass, ':', 1, true)
  return answer('admitted', tonumber(string.sub(pass, 1, sep - 1)),
    tonumber(string.sub(pass, sep + 1)))
end
local rank = redis.call('ZRANK', pre, user)
if rank then
  if drawn then return answer('waiting', rank + 1, 0) end
  return answer('pre', 0, 0)
end
local turn = redis.call('ZSCORE', post, user)
if turn then return answer('waiting', tonumber(m[4]) + tonumber(turn), 0) end
if ARGV[1] ~= 'join' then return answer('not_joined', 0, 0) end

if not drawn then
  if redis.call('HSETNX', meta, META.seed, ARGV[3]) == 1 then
    -- The seed's fingerprint is shown from now on; the seed itself from the opening.
    redis.call('HSET', meta, META.seed_sha1, redis.sha1hex(ARGV[3]))
  end
  local seed = redis.call('HGET', meta, META.seed)
  local draw = tonumber(string.sub(redis.sha1hex(seed .. ':' .. user), 1, 13), 16)
  redis.call('ZADD', pre, string.format('%d', draw), user)
  return answer('pre', 0, 0)
end
local seq = redis.call('HINCRBY', meta, META.seq, 1)
redis.call('ZADD', post, seq, user)
redis.call('HSET', joined, user, string.format('%d', now))
return answer('waiting', tonumber(m[4]) + seq, 0)
