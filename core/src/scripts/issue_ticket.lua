-- Trades an open challenge for a ticket, atomically with the campaign's state and the
-- cap on live tickets. A user holds at most one live ticket per campaign: asking again
-- returns it. Tickets past their expiry leave the count, so unused ones go back to the
-- pool.
-- KEYS: challenge, live (sorted set: user -> ticket expiry ms), tickets (hash: user ->
--       ticket), rules (hash mirrored from the campaign: state, starts_at_ms, cap)
-- ARGV: user, ticket, ticket expiry ms, window ms (no ticket earlier before starts_at)
-- Returns {'ok'}, {'same', ticket, expiry ms}, {'gone'} (no such open challenge),
-- {'exhausted'}, {'unknown'} (no such campaign, or a draft), {'ended'}, or
-- {'early', starts_at_ms}.
local rules = redis.call('HMGET', KEYS[4], RULES.state, RULES.starts_at_ms, RULES.cap)
local state = rules[1]
if not state then return {'unknown'} end
if state == 'ended' then return {'ended'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local starts = tonumber(rules[2]) or 0
if starts > 0 and now < starts - tonumber(ARGV[4]) then
  return {'early', starts}
end
local cap = tonumber(rules[3])
if not cap then return {'unknown'} end
if redis.call('DEL', KEYS[1]) == 0 then return {'gone'} end
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #expired > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  for i = 1, #expired, 1000 do
    redis.call('HDEL', KEYS[3], unpack(expired, i, math.min(i + 999, #expired)))
  end
end
local mine = redis.call('HGET', KEYS[3], ARGV[1])
if mine then return {'same', mine, redis.call('ZSCORE', KEYS[2], ARGV[1])} end
if redis.call('ZCARD', KEYS[2]) >= cap then return {'exhausted'} end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return {'ok'}
