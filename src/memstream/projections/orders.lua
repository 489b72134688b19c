-- A memory's places in its tenant's orders, the sorted sets beside the memories, each read
-- from the memory's own hash so that writing, removing and swapping a memory all agree on
-- them. `orders_prefix` is the tenant's prefix of order keys (Keyspace.orders):
--
--   a conversation memory's thread:  prefix .. the thread's hex tag; score the memory's time,
--     member the log offset (padded, so that equal times sort in the log's order) then the id
--   an extracted fact's subject:     prefix .. 's:' .. the subject's key (hex digits, so never
--     a thread's tag); score its valid-from, member its id (memory.validity)

-- The log offset is lineage's fifth item (schema.lineage_field: a compact JSON array whose
-- first four hold no comma), read with a pattern: every write of a memory comes here.
local function logged_at(lineage)
  if not lineage then
    return -1
  end
  return tonumber(string.match(lineage, '^%[[^,]*,[^,]*,[^,]*,[^,]*,(%-?%d+)[,%]]')) or -1
end

-- The memory's places, each {key, score, member}: `thread` (nil for a memory that has no
-- thread or is not a conversation's: a store item's namespace is not one) and `subject` (nil
-- for a memory that names none); both nil for a memory not stored. One read of its hash.
local function places(memory_key, orders_prefix)
  local f = redis.call(
    'HMGET', memory_key, 'memory_type', 'thread_tag', 'timestamp', 'lineage', 'id', 'subject',
    'valid_from')
  local found = {}
  if f[1] == 'conversation' and f[2] and f[2] ~= '' and f[3] then
    found.thread = {
      orders_prefix .. f[2], f[3], string.format('%020d', logged_at(f[4]) + 1) .. ':' .. f[5]}
  end
  if f[6] and f[6] ~= '' and f[7] then
    found.subject = {orders_prefix .. 's:' .. f[6], f[7], f[5]}
  end
  return found
end

local function orders_leave(memory_key, orders_prefix)
  local found = places(memory_key, orders_prefix)
  for _, place in pairs({found.thread, found.subject}) do
    redis.call('ZREM', place[1], place[3])
  end
end

local function orders_join(memory_key, orders_prefix)
  local found = places(memory_key, orders_prefix)
  for _, place in pairs({found.thread, found.subject}) do
    redis.call('ZADD', place[1], place[2], place[3])
  end
end
