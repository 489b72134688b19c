-- A session's put (projections/working_memory.py), a compare-and-set on its version in one
-- round trip: store the document only while the session is at the version the putter read.
-- KEYS: the session's hash, the tenant's sessions (scored by expiry), the sessions' owners.
-- ARGV: expected version, document, TTL in seconds ('' for none), expiry score, session id,
-- owner. Answers {1, the new version}, or {0, the current version} when another put came first.
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then
  return {0, current}
end
redis.call('HSET', KEYS[1], 'document', ARGV[2], 'version', current + 1)
if ARGV[3] == '' then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('HSET', KEYS[3], ARGV[5], ARGV[6])
return {1, current + 1}
