-- Publishes a code pool staged in `staging`, once.
-- KEYS: staging, pool, loaded flag
-- Returns 1 when published now, 0 when it was already.
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('SET', KEYS[3], '1')
return 1
