-- The opening's draw: the first join or admission that finds the campaign live (or
-- paused) and past `starts_at` closes the pre-queue, whose order by draw becomes the
-- line. Given the room's `meta` and `pre` keys, the state, the opening (ms; 0: none),
-- when it was drawn (nil: not yet) and the pre-queue's size as `meta` holds them, returns
-- the last two as they are now.
local function draw_at_opening(meta, pre, state, starts, drawn, pre_n, now)
  if drawn or not (state == 'live' or state == 'paused') or (starts ~= 0 and now < starts) then
    return drawn, pre_n
  end
  drawn = string.format('%d', now)
  pre_n = redis.call('ZCARD', pre)
  redis.call('HSET', meta, META.drawn_ms, drawn, META.pre, pre_n)
  return drawn, pre_n
end
