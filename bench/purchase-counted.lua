-- wrk: bench/purchase.lua's purchase, and at the end the count of each status answered
-- ("status 409: 12345"), for runs where which answer came matters more than wrk's speed.
dofile("bench/purchase.lua")
local threads = {}
function setup(thread)
  table.insert(threads, thread)
end
function init()
  statuses = {}
end
function response(status)
  statuses[status] = (statuses[status] or 0) + 1
end
function done()
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get("statuses")) do
      io.write(string.format("status %d: %d\n", status, n))
    end
  end
end
