-- Releases a lock only if this holder still has it.
-- KEYS: lock
-- ARGV: the holder's token
-- Returns 1 when released, 0 when the lock was gone or another holder's.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
