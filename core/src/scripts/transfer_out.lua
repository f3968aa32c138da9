-- First step of moving stock between partitions: take units off the source and log the
-- transfer there, until the target has applied it and the source has acknowledged.
-- KEYS: source part, source outgoing log
-- ARGV: target partition, units wanted, source partition
-- Returns {moved, transfer_id, stock_left, transit, inflow}
local part, log = KEYS[1], KEYS[2]
local m = redis.call('HMGET', part, PART.stock, PART.transit, PART.inflow)
local stock, transit = tonumber(m[1] or '0'), tonumber(m[2] or '0')
local n = math.min(stock, tonumber(ARGV[2]))
if n < 1 then return {0, '', stock, transit, m[3] or '0'} end
local id = ARGV[3] .. '.' .. redis.call('HINCRBY', part, PART.xseq, 1)
local t = redis.call('TIME')
redis.call('HINCRBY', part, PART.stock, -n)
redis.call('HINCRBY', part, PART.transit, n)
redis.call('HSET', log, id, ARGV[1] .. ':' .. n .. ':' .. t[1])
return {n, id, stock - n, transit + n, m[3] or '0'}
