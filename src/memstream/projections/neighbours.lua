-- Recall's thread neighbours, read in one step (orders.lua, prepended, says where a
-- memory sits in its thread): for each hit, the memories within `reach` places of it in its
-- thread's order, the hit left out, each as the values of the fields asked for.
-- Read-only (EVAL_RO): no key is written.
--
-- ARGV[1]  the tenant's memory key prefix   ARGV[2] its order key prefix
-- ARGV[3]  reach   ARGV[4] the number of hits n   ARGV[5 .. 4+n] their ids
-- ARGV[5+n] the number of field names f   ARGV[6+n .. 5+n+f] the field names to return
-- ARGV[6+n+f ..] ids the caller holds already (the search's candidates)
--
-- Returns one array per hit, in order: its neighbours in thread order, each the values (nil
-- where absent: all of them for one removed meanwhile), or for one the caller holds its id
-- alone (one value: nothing read twice); empty for a hit that is gone or has no thread.

local prefix, orders = ARGV[1], ARGV[2]
local reach, n = tonumber(ARGV[3]), tonumber(ARGV[4])
local f = tonumber(ARGV[5 + n])
local fields, held = {}, {}
for i = 6 + n, 5 + n + f do
  fields[#fields + 1] = ARGV[i]
end
for i = 6 + n + f, #ARGV do
  held[ARGV[i]] = true
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
        local id = string.match(other, '([^:]+)$')
        if held[id] then
          near[#near + 1] = {id}
        else
          near[#near + 1] = redis.call('HMGET', prefix .. id, unpack(fields))
        end
      end
    end
  end
  found[h] = near
end
return found
