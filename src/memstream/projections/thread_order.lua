-- A conversation memory's place in its thread's order (the `threads` sorted set beside the
-- memories): the set's key, its score (the memory's time) and its member (the log offset,
-- padded so that equal times sort in the log's order, then the id), read from the memory's
-- own hash, so that writing, removing and swapping a memory all agree on it. Nil for a memory
-- that has no thread or is not a conversation's (a store item's namespace is not one).
--
-- `threads_prefix` is the tenant's prefix of thread-order keys; the thread's hex tag ends it.
local function thread_place(memory_key, threads_prefix)
  local f = redis.call('HMGET', memory_key, 'memory_type', 'thread_tag', 'timestamp', 'lineage', 'id')
  if f[1] ~= 'conversation' or not f[2] or f[2] == '' or not f[3] then
    return nil
  end
  -- The offset is lineage's fifth item (schema.lineage_field: a compact JSON array whose first
  -- four hold no comma), read with a pattern: every write of a memory comes here.
  local offset = -1
  if f[4] then
    offset = tonumber(string.match(f[4], '^%[[^,]*,[^,]*,[^,]*,[^,]*,(%-?%d+)[,%]]')) or -1
  end
  return threads_prefix .. f[2], f[3], string.format('%020d', offset + 1) .. ':' .. f[5]
end

local function thread_leave(memory_key, threads_prefix)
  local key, _, member = thread_place(memory_key, threads_prefix)
  if key then
    redis.call('ZREM', key, member)
  end
end

local function thread_join(memory_key, threads_prefix)
  local key, score, member = thread_place(memory_key, threads_prefix)
  if key then
    redis.call('ZADD', key, score, member)
  end
end

