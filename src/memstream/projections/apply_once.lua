-- Apply one memory event at most once, with the tenant's bound eviction, in one atomic step.
--
-- KEYS[1]  the tenant's applied-markers hash (event id -> recorded outcome)
-- KEYS[2]  the tenant's eviction-order sorted set (members sort by importance, time, id)
-- KEYS[3]  the consumer positions hash ("topic/partition" -> offset)
-- KEYS[4…] the hashes of the memories the event writes
-- ARGV[1]  event id            ARGV[2] outcome to record (JSON)
-- ARGV[3]  max memories (0: unbounded)
-- ARGV[4]  position field ("" : none)   ARGV[5] offset
-- ARGV[6]  key prefix of the tenant's memories (eviction derives keys from member ids)
-- ARGV[7…] for each memory key in order: its order member, its number of field/value pairs,
--          then the pairs
--
-- Returns {1, outcome, evicted ids} when applied now, {0, recorded outcome, {}} when the
-- event had been applied before (a redelivery or a replay): nothing is written twice.

local recorded = redis.call('HGET', KEYS[1], ARGV[1])
if recorded then
  return {0, recorded, {}}
end

local a = 7
for k = 4, #KEYS do
  local member = ARGV[a]
  local pairs_count = tonumber(ARGV[a + 1])
  a = a + 2
  local fields = {}
  for j = 0, 2 * pairs_count - 1 do
    fields[#fields + 1] = ARGV[a + j]
  end
  a = a + 2 * pairs_count
  redis.call('HSET', KEYS[k], unpack(fields))
  redis.call('ZADD', KEYS[2], 0, member)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])

if ARGV[4] ~= '' then
  local current = tonumber(redis.call('HGET', KEYS[3], ARGV[4]) or '-1')
  if tonumber(ARGV[5]) > current then
    redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
  end
end

local evicted = {}
local bound = tonumber(ARGV[3])
if bound > 0 then
  local excess = redis.call('ZCARD', KEYS[2]) - bound
  if excess > 0 then
    local victims = redis.call('ZRANGE', KEYS[2], 0, excess - 1)
    for _, member in ipairs(victims) do
      local id = string.match(member, '([^:]+)$')
      redis.call('DEL', ARGV[6] .. id)
      evicted[#evicted + 1] = id
    end
    redis.call('ZREMRANGEBYRANK', KEYS[2], 0, excess - 1)
  end
end
return {1, ARGV[2], evicted}
