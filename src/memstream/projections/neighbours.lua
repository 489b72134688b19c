-- Recall's thread neighbours, read in one step (orders.lua, prepended, says where a
-- memory sits in its thread): for each hit, the memories within `reach` places of it in its
-- thread's order, the hit left out, each as the values of the fields asked for.
-- Read-only (EVAL_RO): no key is written.
--
-- ARGV[1]  the tenant's memory key prefix   ARGV[2] its order key prefix
-- ARGV[3]  reach   ARGV[4] the number of hits n   ARGV[5 .. 4+n] their ids
-- ARGV[5+n ..] the field names to return
--
-- Returns one array per hit, in order: its neighbours in thread order, each the values (nil
-- where absent: all of them for one removed meanwhile); empty for a hit that is gone or has
-- no thread.

local prefix, orders = ARGV[1], ARGV[2]
local reach, n = tonumber(ARGV[3]), tonumber(ARGV[4])
local fields = {}
for i = 5 + n, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
local found = {}
for h = 1, n do
  local near = {}
  local place = places(prefix .. ARGV[4 + h], orders).thread
  local key, member = place and place[1], place and place[3]
  local at = key and redis.call('ZRANK', key, member)
  if at then
    for _, other in ipairs(redis.call('ZRANGE', key, math.max(at - reach, 0), at + reach)) do
      if other ~= member then
        near[#near + 1] = redis.call('HMGET', prefix .. string.match(other, '([^:]+)$'), unpack(fields))
      end
    end
  end
  found[h] = near
end
return found
