-- Moves a campaign to a new state when it is in one of the allowed ones.
-- KEYS: campaign hash
-- ARGV: new state, allowed states...
-- Returns {1, new} when moved, {0, current} when refused (current is false when absent).
local cur = redis.call('HGET', KEYS[1], 'state')
if not cur then return {0, false} end
if cur == ARGV[1] then return {1, cur} end
for i = 2, #ARGV do
  if cur == ARGV[i] then
    redis.call('HSET', KEYS[1], 'state', ARGV[1])
    return {1, ARGV[1]}
  end
end
return {0, cur}
