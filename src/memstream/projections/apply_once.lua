-- Apply memory events, each at most once, with the tenant's bound eviction: every event of the
-- call is atomic on its own (and the call as a whole, since a script runs alone).
--
-- KEYS[1]  the live-generation pointer ({ns}:generation)
-- KEYS[2]  the generation's consumer positions hash ("topic/partition" -> offset)
-- ARGV[1]  the generation these keys belong to, checked against KEYS[1] ("": not checked,
--          a rebuild writing a generation that is not live yet)
-- ARGV[2]  max memories a tenant keeps (0: unbounded)
-- ARGV[3]  the positions the batch follows, a MessagePack map ("topic/partition" -> the offset
--          before the batch's first message there; "": not checked): a position behind one
--          means Redis lost writes the log holds as consumed, and nothing is written until the
--          gap is read again (streams.heal). Every call of a batch carries the same map, so
--          a refused first call refuses the later ones too.
-- ARGV[4…] one event each, a MessagePack array (one argument an event, packed once by the
--          writer, not one argument per field):
--   1 event id   2 kind: record | put | forget | consolidate | replace | erase | expire |
--     document
--   3 position field ("": none)   4 offset
--   5 the tenant's applied-markers hash (event id -> recorded outcome)
--   6 the tenant's eviction-order sorted set (members sort by importance, time, id)
--   7 the tenant's tombstones (memory ids forgotten: never written again)
--   8 key prefix of the tenant's memories (keys derive from memory ids)
--   9 key prefix of the tenant's thread and subject orders (orders.lua, prepended)
--   10… by kind:
--     record, put, consolidate, replace: the memories to write, each {id, order member,
--            {field, value, field, value, …}, {ids it was derived from}}; consolidate and
--            replace then add the replaced ids as a JSON array
--     forget:  a JSON object {ids, thread, before_us, everything}
--     erase:   the tenant's documents hash: the whole tenant goes
--     document: the tenant's documents hash, then the changes, each a map: `f` the field,
--            `b` the body to put (none: a removal; a field ending in the separator removes
--            every field it begins: a whole collection), `x` what the field must hold now
--            ("": nothing) for any of the event's changes to apply (else outcome `conflict`)
--     expire:  the item's memory id, the put's event id, the deadline it lapsed at (epoch s)
--
-- Returns, for each event in order, {1, outcome, evicted ids} when applied now, {0, recorded
-- outcome, {}} when the event had been applied before (a redelivery or a replay): nothing is
-- written twice; or -1 alone when ARGV[1] is no longer the live generation (nothing written:
-- the caller re-reads it); or -2 alone when a position is behind ARGV[3] (nothing written:
-- the caller heals first). The outcome is JSON: {memories: written ids, removed: forgotten or
-- replaced ids, skipped: reason or absent, missing: ids a consolidation found gone}.

if ARGV[1] ~= '' and (redis.call('GET', KEYS[1]) or '1') ~= ARGV[1] then
  return -1
end
if ARGV[3] ~= '' then
  for field, offset in pairs(cmsgpack.unpack(ARGV[3])) do
    if tonumber(redis.call('HGET', KEYS[2], field) or '-1') < offset then
      return -2
    end
  end
end
local bound = tonumber(ARGV[2])

-- The memory id inside an order member: after its last ':' (schema.memory_id_of says the same).
local function id_of(member)
  return string.match(member, '([^:]+)$')
end

local function apply(e)
  local event_id, kind, field, offset = e[1], e[2], e[3], e[4]
  local applied, order, tombstones, prefix, orders = e[5], e[6], e[7], e[8], e[9]

  -- The position moves forward with every event this Redis holds, applied now or found
  -- applied: a position is then proof that everything up to it is here (what healing relies on).
  local function record_position()
    if field ~= '' then
      local current = tonumber(redis.call('HGET', KEYS[2], field) or '-1')
      if tonumber(offset) > current then
        redis.call('HSET', KEYS[2], field, offset)
      end
    end
  end

  local recorded = redis.call('HGET', applied, event_id)
  if recorded then
    record_position()
    return {0, recorded, {}}
  end

  local written, removed = {}, {}
  local outcome = {}

  local function remove(id)
    local member = redis.call('HGET', prefix .. id, 'order_member')
    if member then
      redis.call('ZREM', order, member)
      orders_leave(prefix .. id, orders)
      redis.call('DEL', prefix .. id)
    end
  end

  -- Whether a memory derived from `sources` speaks for one that was forgotten (a fact
  -- extracted from a turn, applied after the turn was forgotten): then it is not written.
  local function from_forgotten(sources)
    for _, source in ipairs(sources or {}) do
      if redis.call('SISMEMBER', tombstones, source) == 1 then
        return true
      end
    end
    return false
  end

  local function write_memories(memories)
    for _, m in ipairs(memories) do
      local id, member, fields = m[1], m[2], m[3]
      -- A forgotten id stays forgotten, whatever event brings it back (a late duplicate, an
      -- import of the same lines, a replay).
      if redis.call('SISMEMBER', tombstones, id) == 0 and not from_forgotten(m[4]) then
        -- A memory saved again under its id (MemorySaved with new content) replaces the old
        -- one: its old places in the eviction, thread and subject orders go with it.
        local previous = redis.call('HGET', prefix .. id, 'order_member')
        if previous and previous ~= member then
          redis.call('ZREM', order, previous)
        end
        if previous then
          orders_leave(prefix .. id, orders)
        end
        redis.call('HSET', prefix .. id, unpack(fields))
        redis.call('ZADD', order, 0, member)
        orders_join(prefix .. id, orders)
        written[#written + 1] = id
      end
    end
  end

  if kind == 'record' then
    write_memories(e[10])
  elseif kind == 'put' then
    -- A store item's memory id is its slot: the put replaces what the slot held (its order
    -- member may differ) and clears the slot's tombstone, since a new put is a new write.
    local id = e[10][1][1]
    remove(id)
    redis.call('SREM', tombstones, id)
    write_memories(e[10])
  elseif kind == 'consolidate' then
    local replaced = cjson.decode(e[11])
    local missing = {}
    for _, id in ipairs(replaced) do
      if redis.call('EXISTS', prefix .. id) == 0 then
        missing[#missing + 1] = id
      end
    end
    if #missing > 0 then
      -- A member was evicted, forgotten or consolidated since the group was decided: the
      -- summary would speak for memories that are gone, so the whole group is skipped.
      outcome.skipped = 'members_missing'
      outcome.missing = missing
    else
      for _, id in ipairs(replaced) do
        remove(id)
        removed[#removed + 1] = id
      end
      write_memories(e[10])
    end
  elseif kind == 'replace' then
    -- Unlike a consolidation, a replacement needs none of what it replaces: whichever of them
    -- is still held goes (no tombstone: nothing writes them again but a replay, which this
    -- event then follows).
    for _, id in ipairs(cjson.decode(e[11])) do
      if redis.call('EXISTS', prefix .. id) == 1 then
        remove(id)
        removed[#removed + 1] = id
      end
    end
    write_memories(e[10])
  elseif kind == 'forget' then
    local selector = cjson.decode(e[10])
    local function forget(id)
      redis.call('SADD', tombstones, id)
      if redis.call('EXISTS', prefix .. id) == 1 then
        remove(id)
        removed[#removed + 1] = id
      end
    end
    if #selector.ids > 0 then
      -- Named ids are tombstoned even if not (or not yet) stored: they must never appear.
      local named = {}
      for _, id in ipairs(selector.ids) do
        named[id] = true
        forget(id)
      end
      -- What was derived from them goes too (a fact extracted from a forgotten turn): one
      -- field read per memory of the tenant, on a forget by ids only.
      for _, member in ipairs(redis.call('ZRANGE', order, 0, -1)) do
        local id = id_of(member)
        local sources = redis.call('HGET', prefix .. id, 'derived_from')
        if sources then
          for source in string.gmatch(sources, '%S+') do
            if named[source] then
              forget(id)
              break
            end
          end
        end
      end
    else
      for _, member in ipairs(redis.call('ZRANGE', order, 0, -1)) do
        local id = id_of(member)
        local match = true
        if not selector.everything then
          if selector.before_us ~= cjson.null then
            match = tonumber(string.match(member, '^%d+:(%d+):')) < selector.before_us
          end
          if match and selector.thread ~= cjson.null then
            match = redis.call('HGET', prefix .. id, 'thread') == selector.thread
          end
        end
        if match then
          forget(id)
        end
      end
    end
  elseif kind == 'expire' then
    -- A store item's TTL ran out. Only the put that lapsed goes, and only if no refresh moved
    -- its deadline past the one the sweeper saw; no tombstone: a later put writes it again.
    local id, put, deadline = e[10], e[11], tonumber(e[12])
    local held = redis.call('HMGET', prefix .. id, 'event_id', 'expires_at')
    if held[1] == put and held[2] and tonumber(held[2]) <= deadline then
      remove(id)
      removed[#removed + 1] = id
    else
      outcome.skipped = 'item_renewed'
    end
  elseif kind == 'document' then
    local documents = e[10]
    for _, change in ipairs(e[11]) do
      if change.x and (redis.call('HGET', documents, change.f) or '') ~= change.x then
        outcome.skipped = 'conflict'
      end
    end
    for _, change in ipairs(outcome.skipped and {} or e[11]) do
      local name, body = change.f, change.b
      if body then
        redis.call('HSET', documents, name, body)
      elseif string.sub(name, -1) == '\031' then
        for _, held in ipairs(redis.call('HKEYS', documents)) do
          if string.sub(held, 1, #name) == name then
            redis.call('HDEL', documents, held)
          end
        end
      else
        redis.call('HDEL', documents, name)
      end
    end
  elseif kind == 'erase' then
    -- A TenantErased: every memory of the tenant and its tombstones. Its content in the log
    -- is unreadable now (its keys are destroyed), so a rebuild has none of it either: the
    -- tenant starts over, as in any replay. The applied markers (event ids and memory ids, no
    -- content) stay: an earlier event redelivered after a crash (a plaintext one could still
    -- be read) must find its marker and write nothing.
    for _, member in ipairs(redis.call('ZRANGE', order, 0, -1)) do
      local id = id_of(member)
      orders_leave(prefix .. id, orders)
      redis.call('DEL', prefix .. id)
      removed[#removed + 1] = id
    end
    redis.call('DEL', order, tombstones, e[10])
  else
    return redis.error_reply('unknown event kind ' .. kind)
  end

  -- cjson writes an empty table as {}, not []; an explicit array marker is not available in
  -- Redis's cjson, so empty lists are left out and read as empty.
  if #written > 0 then outcome.memories = written end
  if #removed > 0 then outcome.removed = removed end
  local encoded = cjson.encode(outcome)
  redis.call('HSET', applied, event_id, encoded)

  record_position()

  local evicted = {}
  if bound > 0 then
    local excess = redis.call('ZCARD', order) - bound
    if excess > 0 then
      local victims = redis.call('ZRANGE', order, 0, excess - 1)
      for _, member in ipairs(victims) do
        local id = id_of(member)
        orders_leave(prefix .. id, orders)
        redis.call('DEL', prefix .. id)
        evicted[#evicted + 1] = id
      end
      redis.call('ZREMRANGEBYRANK', order, 0, excess - 1)
    end
  end
  return {1, encoded, evicted}
end

local replies = {}
for i = 4, #ARGV do
  local reply = apply(cmsgpack.unpack(ARGV[i]))
  if reply.err then
    return reply
  end
  replies[#replies + 1] = reply
end
return replies
