-- What the admission needs of one partition, at one instant: the units taken (held or
-- sold) and the passes used since `cursor` in its log.
-- KEYS: part, pass log
-- ARGV: cursor (entries of the log already counted), most entries to return
-- Returns {now ms, held + sold, cursor after the entries returned, holders...}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[1], PART.held, PART.sold)
-- A partition that is not there is not empty: counting it as nothing taken would free
-- units that may be gone.
if not m[1] and not m[2] then return redis.error_reply('ERR no such partition') end
local taken = (tonumber(m[1]) or 0) + (tonumber(m[2]) or 0)
local from = tonumber(ARGV[1])
local used = redis.call('LRANGE', KEYS[2], from, from + tonumber(ARGV[2]) - 1)
local out = {now, taken, from + #used}
for i = 1, #used do out[#out + 1] = used[i] end
return out
