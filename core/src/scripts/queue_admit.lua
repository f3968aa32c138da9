-- One round of a waiting room's admission, run by the holder of the room's lease alone.
-- It counts the passes used (from the partitions' logs, read just before by
-- queue_usage.lua) and those expired unused, then lets the next shoppers in line
-- through: at most `budget`, and never more than the units left minus the units the
-- outstanding passes reserve. Units left are the total minus those taken; the
-- partitions were read before this runs, and every unit taken since was taken with a
-- pass still counted outstanding here, so the count errs only on the safe side.
-- KEYS: meta, pre, post, joined, admitted, passes, lease
-- ARGV: lease holder, lease ms, budget, units taken, partitions' earliest clock (ms),
--       grace ms, partition count P, the P cursors the reads started from, the P cursors
--       after them, holders of used passes...
-- Returns {'follower'} when another holds the lease, or when another round moved the
-- cursors since this one read them (its reads are stale: a unit taken with a pass that
-- round has counted would be counted neither taken nor reserved here), else
--   {'leader', admitted now, passes outstanding, units left, sold out (0|1), waits ms...}
local meta, pre, post, joined, admitted, passes, lease =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local holder = redis.call('GET', lease)
if holder and holder ~= ARGV[1] then return {'follower'} end
redis.call('SET', lease, ARGV[1], 'PX', ARGV[2])

local m = redis.call('HMGET', meta, META.state, META.starts_at_ms, META.drawn_ms, META.pre,
  META.admitted, META.seq, META.total, META.pass_ttl_ms, META.ends_at_ms)
local state = m[1]
if not state then return {'leader', 0, 0, 0, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local drawn
drawn, m[4] = draw_at_opening(meta, pre, state, tonumber(m[2]) or 0, m[3], m[4], now)

local parts = tonumber(ARGV[7])
local cursors = {}
for p = 0, parts - 1 do
  cursors[p] = tonumber(redis.call('HGET', meta, META.cursor .. p) or '0')
  if cursors[p] ~= tonumber(ARGV[8 + p]) then return {'follower'} end
end
for p = 0, parts - 1 do
  local after = tonumber(ARGV[8 + parts + p])
  if after > cursors[p] then
    redis.call('HSET', meta, META.cursor .. p, after)
    redis.call('HINCRBY', meta, META.used, after - cursors[p])
  end
end
for i = 8 + 2 * parts, #ARGV do redis.call('ZREM', passes, ARGV[i]) end
-- A pass is taken for expired only well after its end by every partition's clock: by
-- then any use of it was in the logs just read.
local cutoff = tonumber(ARGV[5]) - tonumber(ARGV[6])
local lapsed = redis.call('ZREMRANGEBYSCORE', passes, '-inf', cutoff)
if lapsed > 0 then redis.call('HINCRBY', meta, META.expired, lapsed) end

local outstanding = redis.call('ZCARD', passes)
local left = tonumber(m[7]) - tonumber(ARGV[4])
local done = tonumber(m[5]) or 0
local pre_n = tonumber(m[4]) or 0
local line = drawn and (pre_n + (tonumber(m[6]) or 0)) or 0
local n = 0
local ends = tonumber(m[9]) or 0
if state == 'live' and drawn and (ends == 0 or now < ends) then
  n = math.max(0, math.min(tonumber(ARGV[3]), left - outstanding, line - done))
end
local out = {'leader', n, outstanding + n, left, 0}
if n > 0 then
  local expiry = string.format('%d', now + tonumber(m[8]))
  local place = done
  local function admit(user, waited)
    place = place + 1
    redis.call('HSET', admitted, user, place .. ':' .. expiry)
    redis.call('ZADD', passes, expiry, user)
    out[#out + 1] = waited
  end
  local last = done + n
  if done < pre_n then
    for _, user in ipairs(redis.call('ZRANGE', pre, done, math.min(last, pre_n) - 1)) do
      admit(user, now - tonumber(drawn))
    end
  end
  if last > pre_n then
    local from = math.max(done, pre_n) - pre_n
    for _, user in ipairs(redis.call('ZRANGE', post, from, last - pre_n - 1)) do
      local at = tonumber(redis.call('HGET', joined, user) or now)
      redis.call('HDEL', joined, user)
      admit(user, now - at)
    end
  end
  redis.call('HSET', meta, META.admitted, last)
end
local sold = (left <= 0 and outstanding == 0) and 1 or 0
redis.call('HSET', meta, META.sold_out, sold)
out[5] = sold
return out
