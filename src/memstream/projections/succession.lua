-- Until when recalled facts held, read in one step (orders.lua, prepended, says where a fact
-- sits in its subject's order): for each fact, the first valid-from of its subject later than
-- its own, which is its valid_to (memory.validity). Read-only (EVAL_RO): no key is written.
--
-- ARGV[1]  the tenant's memory key prefix   ARGV[2] its order key prefix
-- ARGV[3..] the facts' ids
--
-- Returns one string per fact, in order: the successor's valid-from (epoch seconds), or ''
-- for a fact nothing superseded (or that is gone, or names no subject).

local prefix, orders = ARGV[1], ARGV[2]
local found = {}
for i = 3, #ARGV do
  local until_ = ''
  local place = places(prefix .. ARGV[i], orders).subject
  if place then
    local next = redis.call(
      'ZRANGEBYSCORE', place[1], '(' .. place[2], '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if next[2] then
      until_ = next[2]
    end
  end
  found[#found + 1] = until_
end
return found
