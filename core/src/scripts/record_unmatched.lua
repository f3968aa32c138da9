-- Keeps a payment for an order nobody knows, the first record of each payment id, for
-- operators.
-- KEYS: unmatched payments (hash payment id -> record)
-- ARGV: payment id, record (JSON)
-- Returns how many replicas the master has, for the caller's `WAIT`.
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
local info = redis.call('INFO', 'replication')
return tonumber(string.match(info, 'connected_slaves:(%d+)') or '0')
