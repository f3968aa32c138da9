-- Trades an open challenge for the right to a ticket: the challenge is used up, and the
-- campaign's ticket count stays within its cap.
-- KEYS: challenge, issued count
-- ARGV: cap
-- Returns 'ok', 'gone' (no such open challenge) or 'exhausted'.
if redis.call('DEL', KEYS[1]) == 0 then return 'gone' end
if redis.call('INCR', KEYS[2]) > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[2])
  return 'exhausted'
end
return 'ok'
