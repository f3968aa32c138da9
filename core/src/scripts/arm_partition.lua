-- Loads a partition's share of stock, exactly once.
-- `layout` names the key layout the purchase script reads (see purchase.lua).
-- KEYS: part
-- ARGV: units, per-user limit, hold ttl (ms), starts_at_ms, ends_at_ms
if redis.call('HEXISTS', KEYS[1], PART.initial) == 1 then return 0 end
redis.call('HSET', KEYS[1], PART.initial, ARGV[1], PART.stock, ARGV[1], PART.held, 0, PART.sold, 0,
  PART.transit, 0, PART.inflow, 0, PART.seq, 0, PART.xseq, 0, PART.state, 'armed',
  PART.layout, LAYOUT, PART.limit, ARGV[2], PART.hold_ttl_ms, ARGV[3],
  PART.starts_at_ms, ARGV[4], PART.ends_at_ms, ARGV[5])
return 1
