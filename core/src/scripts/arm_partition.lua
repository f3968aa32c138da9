-- Loads a partition's share of stock, exactly once.
-- `layout` names the key layout the purchase script reads (see purchase.lua).
-- KEYS: part
-- ARGV: units, per-user limit, hold ttl (ms), starts_at_ms, ends_at_ms
if redis.call('HEXISTS', KEYS[1], 'initial') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'initial', ARGV[1], 'stock', ARGV[1], 'held', 0, 'sold', 0,
  'transit', 0, 'inflow', 0, 'seq', 0, 'xseq', 0, 'state', 'armed',
  'layout', 2, 'limit', ARGV[2], 'hold_ttl_ms', ARGV[3], 'starts_at_ms', ARGV[4], 'ends_at_ms', ARGV[5])
return 1
