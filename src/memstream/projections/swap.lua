-- Swap a rebuilt generation in, atomically, once it has caught up with the live one.
--
-- KEYS[1]  the live-generation pointer ({ns}:generation)
-- KEYS[2]  the live generation's positions    KEYS[3] the rebuilt generation's positions
-- ARGV[1]  the live generation the rebuild was started against
-- ARGV[2]  mode: all | tenant
-- all:     ARGV[3] the rebuilt generation  ARGV[4] the index alias  ARGV[5] the rebuilt index
-- tenant:  KEYS[4..] the live tenant's keys (Keyspace.tenant_keys: order, applied, forgotten,
--          documents), then as many of the rebuilt tenant's, in the same order
--          ARGV[3] the live tenant's memory key prefix  ARGV[4] the rebuilt one's
--          ARGV[5] the live tenant's order key prefix  ARGV[6] the rebuilt one's
--          ARGV[7] the position field of the tenant's partition: the only one compared, as
--          the tenant's state depends on its own events alone
--
-- Returns 1 when swapped, 0 when the live generation has taken in offsets the rebuild has
-- not yet (the caller reads on and tries again), -1 when the live generation changed (another
-- replay swapped first: this rebuild is stale).

if (redis.call('GET', KEYS[1]) or '1') ~= ARGV[1] then
  return -1
end
local live = redis.call('HGETALL', KEYS[2])
for i = 1, #live, 2 do
  if ARGV[2] == 'all' or live[i] == ARGV[7] then
    local rebuilt = tonumber(redis.call('HGET', KEYS[3], live[i]) or '-1')
    if rebuilt < tonumber(live[i + 1]) then
      return 0
    end
  end
end

if ARGV[2] == 'all' then
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('FT.ALIASUPDATE', ARGV[4], ARGV[5])
  return 1
end

-- One tenant: its live keys are replaced by the rebuilt ones, renamed into the live
-- generation, where the live index picks the memory hashes up. Its thread and subject orders
-- go with its memories (found through them: orders.lua says where each memory sits).
local live_prefix, rebuilt_prefix = ARGV[3], ARGV[4]
local live_orders, rebuilt_orders = ARGV[5], ARGV[6]
local function order_keys(memory_key, orders_prefix, into)
  local found = places(memory_key, orders_prefix)
  for _, place in pairs({found.thread, found.subject}) do
    into[string.sub(place[1], #orders_prefix + 1)] = true
  end
end
local live_keys = {}
local count = (#KEYS - 3) / 2  -- keys of each tenant
for _, member in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  local key = live_prefix .. string.match(member, '([^:]+)$')
  order_keys(key, live_orders, live_keys)
  redis.call('DEL', key)
end
for suffix in pairs(live_keys) do
  redis.call('DEL', live_orders .. suffix)
end
for k = 4, 3 + count do
  redis.call('DEL', KEYS[k])
end
local rebuilt_keys = {}
for _, member in ipairs(redis.call('ZRANGE', KEYS[4 + count], 0, -1)) do
  local id = string.match(member, '([^:]+)$')
  order_keys(rebuilt_prefix .. id, rebuilt_orders, rebuilt_keys)
  redis.call('RENAME', rebuilt_prefix .. id, live_prefix .. id)
end
for suffix in pairs(rebuilt_keys) do
  if redis.call('EXISTS', rebuilt_orders .. suffix) == 1 then
    redis.call('RENAME', rebuilt_orders .. suffix, live_orders .. suffix)
  end
end
for k = 4 + count, 3 + 2 * count do
  if redis.call('EXISTS', KEYS[k]) == 1 then
    redis.call('RENAME', KEYS[k], KEYS[k - count])
  end
end
return 1
