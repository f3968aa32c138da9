-- Lends a partition that holds no units to a shard for a while: until the lease is over
-- no unit enters it (expired holds wait to be released, transfers to be applied; see
-- release.lua and transfer_in.lua), so it takes no order, and the shard may answer a
-- retried Idempotency-Key from the first answers it was handed, without asking.
-- KEYS: part, once
-- ARGV: lease (ms), the order sequence of the shard's copy ('' for none), most `once`
--       entries to hand over
-- Returns {0}: not lent (units here or on their way out, units waiting to come in, or
--               too many first answers to hand over);
--         {1, seq}: lent, and the shard's copy is whole (no order since it was made);
--         {1, seq, field...}: lent, with every first answer (`first_answer_field`) of `once`.
local part, once = KEYS[1], KEYS[2]
local m = redis.call('HMGET', part, PART.stock, PART.transit, PART.returning, PART.seq,
  PART.lease_ms, PART.layout)
if m[6] ~= LAYOUT or tonumber(m[1] or '0') ~= 0 or tonumber(m[2] or '0') ~= 0 or m[3] == '1' then
  return {0}
end
local seq = m[4] or '0'
local whole = ARGV[2] == seq
if not whole and redis.call('HLEN', once) > tonumber(ARGV[3]) then return {0} end
local t = redis.call('TIME')
local ends = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
if ends > tonumber(m[5] or '0') then
  redis.call('HSET', part, PART.lease_ms, string.format('%d', ends))
end
if whole then return {1, seq} end
local out = {1, seq}
for _, f in ipairs(redis.call('HKEYS', once)) do
  if string.sub(f, 1, #FIRST_ANSWER) == FIRST_ANSWER then out[#out + 1] = f end
end
return out
