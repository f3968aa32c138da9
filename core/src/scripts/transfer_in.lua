-- Second step: the target applies a logged transfer, once, whoever replays it.
-- KEYS: target part, target applied set
-- ARGV: transfer id, units
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'stock', tonumber(ARGV[2]))
  redis.call('HINCRBY', KEYS[1], 'inflow', 1)
  return 1
end
return 0
