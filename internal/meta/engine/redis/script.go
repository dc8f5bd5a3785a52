package redis

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The server-side scripts know nothing of POSIX or of kvstore's records:
// commitScript compares values and sorted-set ranges and applies writes,
// fetchScript reads keys and, for some, the key a part of the value names.
// They run atomically, like every Redis script. Every key they touch lies
// in the volume's hash tag, so in one cluster slot, and is passed in KEYS,
// except the key fetchScript follows, which it only reads.
var (
	commitScript = redis.NewScript(commitLua)
	fetchScript  = redis.NewScript(fetchLua)
	scanScript   = redis.NewScript(scanLua)
)

// commitLua checks what a transaction read and, if nothing changed,
// applies its writes. It returns 1 when it applied them and 0 on a
// conflict, having written nothing. KEYS and ARGV hold seven sections:
//
//	ARGV[1..7]     nv, ns, nset, ndel, napp, nadd, nz: the sizes of the
//	               sections below
//	value checks   nv KEYS: data keys; ARGV: mode, want for each. Mode "m":
//	               the key must be missing; "v": its value must be want;
//	               "h": the SHA-1 (hex) of its value must be want
//	range checks   ns KEYS: sorted sets; ARGV: min, max, count, digest for
//	               each. The members ZRANGEBYLEX returns (at most count;
//	               0: all) must have the digest rangeDigest computes
//	sets           nset KEYS: data keys; ARGV: their new values (MSET)
//	deletes        ndel KEYS: data keys (DEL)
//	appends        napp KEYS: data keys; ARGV: suffixes (APPEND each)
//	adds           nadd pairs of KEYS: a counter (an 8-byte big-endian
//	               two's-complement integer, missing: 0) and its sorted set
//	               (the counter itself when none); pairs of ARGV: the
//	               delta (decimal) and the counter's member in the set
//	               ("": none). A sum of 0 deletes the counter and its
//	               member, any other is stored and indexed. The sums are
//	               computed with the checks: a counter that is not 8
//	               bytes fails the script before it writes
//	index updates  nz KEYS: sorted sets; ARGV: "a" (ZADD with score 0) or
//	               "r" (ZREM), the number of members, the members
//
// Each section but the appends (one APPEND per key: a transaction appends
// to few) is one command (per 1000 keys, Lua's unpack limit), as a
// call from a script costs the server more than its work here. Every
// check runs before the first write, so a conflict writes nothing, and
// once a script has written, Redis lets it finish even when over
// maxmemory.
const commitLua = `
local nv, ns, nset, ndel, napp, nadd, nz = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local step, k, a = 1000, 1, 8
for first = 0, nv - 1, step do
  local m = math.min(step, nv - first)
  local vs = redis.call('MGET', unpack(KEYS, k + first, k + first + m - 1))
  for i = 1, m do
    local v, j = vs[i], a + 2 * (first + i - 1)
    local mode, want = ARGV[j], ARGV[j + 1]
    if mode == 'm' then
      if v then return 0 end
    elseif not v then
      return 0
    elseif mode == 'v' then
      if v ~= want then return 0 end
    elseif redis.sha1hex(v) ~= want then
      return 0
    end
  end
end
k, a = k + nv, a + 2 * nv
for _ = 1, ns do
  local n, r = tonumber(ARGV[a + 2])
  if n > 0 then
    r = redis.call('ZRANGEBYLEX', KEYS[k], ARGV[a], ARGV[a + 1], 'LIMIT', 0, n)
  else
    r = redis.call('ZRANGEBYLEX', KEYS[k], ARGV[a], ARGV[a + 1])
  end
  for i, m in ipairs(r) do r[i] = #m .. ':' .. m end
  if redis.sha1hex(table.concat(r)) ~= ARGV[a + 3] then return 0 end
  k, a = k + 1, a + 4
end
local sums, ka, aa = {}, k + nset + ndel + napp, a + nset + napp
for i = 1, nadd do
  local v, n = redis.call('GET', KEYS[ka]), 0
  if v then
    if #v ~= 8 then return redis.error_reply('counter ' .. KEYS[ka] .. ' is not 8 bytes') end
    local neg = string.byte(v, 1) >= 128
    for j = 1, 8 do
      local b = string.byte(v, j)
      if neg then b = 255 - b end
      n = n * 256 + b
    end
    if neg then n = -n - 1 end
  end
  n = n + tonumber(ARGV[aa])
  sums[i] = false
  if n ~= 0 then
    local neg, b = n < 0, {}
    if neg then n = -n - 1 end
    for j = 8, 1, -1 do
      local d = n % 256
      n = (n - d) / 256
      if neg then d = 255 - d end
      b[j] = string.char(d)
    end
    sums[i] = table.concat(b)
  end
  ka, aa = ka + 2, aa + 2
end
for first = 0, nset - 1, step do
  local kv = {}
  for i = 1, math.min(step, nset - first) do
    kv[2 * i - 1], kv[2 * i] = KEYS[k + first + i - 1], ARGV[a + first + i - 1]
  end
  redis.call('MSET', unpack(kv))
end
k, a = k + nset, a + nset
for first = 0, ndel - 1, step do
  redis.call('DEL', unpack(KEYS, k + first, k + first + math.min(step, ndel - first) - 1))
end
k = k + ndel
for i = 0, napp - 1 do
  redis.call('APPEND', KEYS[k + i], ARGV[a + i])
end
k, a = k + napp, a + napp
for i = 1, nadd do
  if sums[i] then
    redis.call('SET', KEYS[k], sums[i])
    if ARGV[a + 1] ~= '' then redis.call('ZADD', KEYS[k + 1], 0, ARGV[a + 1]) end
  else
    redis.call('DEL', KEYS[k])
    if ARGV[a + 1] ~= '' then redis.call('ZREM', KEYS[k + 1], ARGV[a + 1]) end
  end
  k, a = k + 2, a + 2
end
for _ = 1, nz do
  local op, n = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  for first = 0, n - 1, step do
    local m = math.min(step, n - first)
    if op == 'a' then
      local zs = {}
      for i = 1, m do zs[2 * i - 1], zs[2 * i] = 0, ARGV[a + first + i - 1] end
      redis.call('ZADD', KEYS[k], unpack(zs))
    else
      redis.call('ZREM', KEYS[k], unpack(ARGV, a + first, a + first + m - 1))
    end
  end
  k, a = k + 1, a + n
end
return 1
`

// fetchLua reads the keys in KEYS and, for each key whose flag is "1" and
// whose value has the given length, also the key
// prefix .. value[from:] .. suffix (Lua's 1-based string.sub). It returns
// the n values followed by the n followed values (nil where a key is
// missing or not followed). The keys are few (see DB.read), so one MGET
// each suffices.
//
//	ARGV[1], ARGV[2]   prefix and suffix of a followed key
//	ARGV[3], ARGV[4]   length of a followed value, first byte used (1-based)
//	ARGV[4+i]          "1" when the value of KEYS[i] is followed
const fetchLua = `
local n, len, from = #KEYS, tonumber(ARGV[3]), tonumber(ARGV[4])
local out = redis.call('MGET', unpack(KEYS))
local next, at = {}, {}
for i = 1, n do
  local v = out[i]
  out[n + i] = false
  if v and ARGV[4 + i] == '1' and #v == len then
    next[#next + 1] = ARGV[1] .. string.sub(v, from) .. ARGV[2]
    at[#at + 1] = n + i
  end
end
if #next > 0 then
  local vs = redis.call('MGET', unpack(next))
  for i, j in ipairs(at) do out[j] = vs[i] end
end
return out
`

// scanLua reads a range of a sorted set and the values of the data keys
// its members name, in one round trip and one atomic step: the members
// ZRANGEBYLEX returns from KEYS[1] between ARGV[2] and ARGV[3] (at most
// ARGV[4]), followed by the values of ARGV[1] .. member (nil where a key
// is missing). Scans with a count of at most scanScriptMax use it; MGET
// goes by 1000 keys (Lua's unpack limit).
const scanLua = `
local ms = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
local m, out = #ms, {}
for i = 1, m do out[i] = ms[i] end
for first = 1, m, 1000 do
  local last, ks = math.min(first + 999, m), {}
  for i = first, last do ks[#ks + 1] = ARGV[1] .. ms[i] end
  local vs = redis.call('MGET', unpack(ks))
  for i = first, last do out[m + i] = vs[i - first + 1] end
end
return out
`

// scanScriptMax is the largest count a scan reads with scanLua; a larger
// or unbounded one reads members and values in two steps, so that no
// script holds the server for long.
const scanScriptMax = 4096

// hashAbove is the value length from which commitLua compares a value by
// its SHA-1 rather than sending it back.
const hashAbove = 100

// appendValueCheck appends the ARGV of the check that key still has value
// v (nil: is missing).
func appendValueCheck(args []any, v []byte) []any {
	switch {
	case v == nil:
		return append(args, "m", "")
	case len(v) > hashAbove:
		h := sha1.Sum(v)
		return append(args, "h", hex.EncodeToString(h[:]))
	}
	return append(args, "v", v)
}

// rangeDigest is the digest commitLua computes of the members of a range.
func rangeDigest(members []string) string {
	h := sha1.New()
	var b []byte
	for _, m := range members {
		b = strconv.AppendInt(b[:0], int64(len(m)), 10)
		b = append(b, ':')
		h.Write(b)
		h.Write([]byte(m))
	}
	return hex.EncodeToString(h.Sum(nil))
}
