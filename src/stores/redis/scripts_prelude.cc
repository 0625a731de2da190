// stores/redis/scripts_prelude.cc — the Lua prelude shared by every lock
// script (see docs/stores/redis.md for the key layout and the rules).
//
// Every script starts with this prelude (as an EVAL script, or once in the
// function library, see scripts.cc). It reads the time from the Redis
// server (TIME, once per call: all decisions of one call use one instant),
// loads lock states lazily, "advances" each loaded lock to that instant
// (expired leases and dead waiters leave in time order, freed capacity goes to
// the queue head: core::LockTable::advance), and at the end (finish) writes
// back what changed and publishes wake-ups.
#include "stores/redis/scripts.h"

namespace baton::store::redis {

// The per-call state, as an EVAL script sets it up.
const char* const kPreludeEval = R"LUA(
local P = ARGV[1]
local TM = redis.call('TIME')
local NOW = tonumber(TM[1]) * 1000000 + tonumber(TM[2])
local HB = 2000000
local MAXQ = 100000
local cache, touched, changed, dirty, pubs = {}, {}, {}, {}, {}
local load
)LUA";

// The same state in the function library: upvalues shared by every
// function, reset by begin() at the start of each call (Redis runs one
// function at a time, so they never interleave).
const char* const kPreludeLibrary = R"LUA(
local ARGV, P, NOW
local HB = 2000000
local MAXQ = 100000
local cache, touched, changed, dirty, pubs
local load
local function begin(args)
  ARGV = args
  P = args[1]
  local tm = redis.call('TIME')
  NOW = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
  -- A call that left them empty (every fast path) leaves them for the next.
  if cache == nil or next(cache) ~= nil or next(changed) ~= nil or
      #touched > 0 or #dirty > 0 or #pubs > 0 then
    cache, touched, changed, dirty, pubs = {}, {}, {}, {}, {}
  end
end
)LUA";

const char* const kPrelude = R"LUA(

local function quote(n)
  local s = string.sub(n, 1, 64)
  s = string.gsub(s, '([\\"])', '\\%1')
  s = string.gsub(s, '%z', '\\0')
  s = '"' .. s .. '"'
  if #n > 64 then s = s .. '...' end
  return s
end
local function num(x) return string.format('%d', x) end
-- A lone lock: one exclusive holder, no queue, no Redlock round, as the
-- acquire fast path writes it. The value is the MessagePack that
-- cmsgpack.pack would write for {c, h = {lease}, q = {}} (every baton reads
-- it as such), but built by concatenation, with the numbers as float64:
-- cmsgpack writes whole numbers as integers, so a value that starts with
-- the map, `c` and a float64 was written here and has this exact layout,
-- and the release fast path reads its token and expiry at fixed offsets
-- instead of unpacking it (docs/stores/redis.md, "Lone locks").
local function mstr(x)
  local n = #x
  if n < 32 then return string.char(0xa0 + n) .. x end
  if n < 256 then return string.char(0xd9, n) .. x end
  if n < 65536 then
    return string.char(0xda, math.floor(n / 256), n % 256) .. x
  end
  return string.char(0xdb, math.floor(n / 16777216) % 256,
                     math.floor(n / 65536) % 256, math.floor(n / 256) % 256,
                     n % 256) .. x
end
local function mdbl(x) return '\203' .. struct.pack('>d', x) end
local function lone_value(tok, f, ttl, e, label, rkey, cap)
  return '\131\161c' .. mdbl(cap) .. '\161h\145\136\161t' .. mstr(tok) ..
         '\161f' .. mdbl(f) .. '\163ttl' .. mdbl(ttl) .. '\161e' .. mdbl(e) ..
         '\161n\1\161l' .. mstr(label) .. '\161k' .. mstr(rkey) ..
         '\161a\144\161q\144'
end
-- The expiry of the lone value v if tok holds it; nil for any other value.
local function lone_expiry(v, tok)
  if string.sub(v, 1, 4) ~= '\131\161c\203' or
      string.sub(v, 13, 18) ~= '\161h\145\136\161t' then
    return nil
  end
  local t = mstr(tok)
  if string.sub(v, 19, 18 + #t) ~= t then return nil end
  local p = 19 + #t  -- the key `f`, then f, `ttl`, ttl, `e`, e
  if string.sub(v, p + 24, p + 26) ~= '\161e\203' then return nil end
  return (struct.unpack('>d', v, p + 27))
end
-- Waiters are stored packed, each as its own string "<#t>:<t><msgpack of
-- the other fields as an array>" (the lock's `Q`), and unpacked only when a
-- script needs that waiter: a call on a lock with a long queue reads the
-- head or looks for one token, not every record. s.q holds packed strings
-- and unpacked tables side by side; W(s, i) unpacks entry i in place.
-- s.qd / s.qm bound the packed waiters' dead_at from below / above
-- (advance unpacks every waiter only once the lower bound is due; the
-- key's PXAT uses the upper bound).
local WF = {'ttl', 'l', 'k', 'ar', 'd', 'hb', 'o', 'r', 'sh', 'g', 'ib'}
local function wpack(w)
  local a = {}
  for i, f in ipairs(WF) do
    local v = w[f]
    if v == nil then v = false end
    a[i] = v
  end
  return num(#w.t) .. ':' .. w.t .. cmsgpack.pack(a)
end
local function W(s, i)
  local x = s.q[i]
  if type(x) == 'string' then
    local c = string.find(x, ':', 1, true)
    local e = c + tonumber(string.sub(x, 1, c - 1))
    local a = cmsgpack.unpack(string.sub(x, e + 1))
    x = {t = string.sub(x, c + 1, e)}
    for j, f in ipairs(WF) do
      if a[j] ~= false then x[f] = a[j] end
    end
    s.q[i] = x
  end
  return x
end
local function unpack_all(s)
  for i = 1, #s.q do W(s, i) end
  s.qd, s.qm = nil, nil
end
local function mod(n) changed[n] = true end
local function mark(n) mod(n); dirty[#dirty + 1] = n end
-- A message about the waiter w of lock n goes to the inbox of the store
-- that queued it (w.ib), so only that client's subscriber receives it; a
-- record without one (written by an older baton) is told on the lock's
-- channel.
local function publish(n, w, msg)
  local ch = 'ch:' .. n
  if w.ib and w.ib ~= '' then ch = 'in:' .. w.ib end
  pubs[#pubs + 1] = {ch, msg}
end
-- A single-lock grant's message carries the grant, so the woken waiter
-- needs no further round trip: "waiter lease fencing ttl holds capacity
-- expiry_us now_us name".
local function publish_grant(n, s, le, w)
  local tok = w.t
  publish(n, w, tok .. ' ' .. le.t .. ' ' .. num(le.f) .. ' ' .. num(le.ttl) ..
          ' ' .. num(le.n) .. ' ' .. num(s.c) .. ' ' .. num(le.e) .. ' ' ..
          num(NOW) .. ' ' .. n)
end
local function dead_at(w)
  if w.hb and w.hb < w.d then return w.hb end
  return w.d
end
local function find_lease(s, tok)
  for i, le in ipairs(s.h) do
    if le.t == tok then return le, i end
    for _, a in ipairs(le.a) do
      if a == tok then return le, i end
    end
  end
  return nil
end
local function find_rkey(s, k)
  if k == nil or k == '' then return nil end
  for _, le in ipairs(s.h) do
    if le.k == k then return le end
  end
  return nil
end
local function find_waiter(s, tok)
  local pre = num(#tok) .. ':' .. tok
  for i, x in ipairs(s.q) do
    if type(x) == 'string' then
      if string.sub(x, 1, #pre) == pre then return i end
    elseif x.t == tok then
      return i
    end
  end
  return nil
end
local function create(n, cap)
  local s = {c = cap, h = {}, q = {}}
  cache[n] = s
  touched[#touched + 1] = n
  mod(n)
  return s
end
local function add_lease(n, s, tok, ttl, label, rkey, sh)
  local f = redis.call('INCR', P .. 'f:' .. n)
  local le = {t = tok, f = f, ttl = ttl, e = NOW + ttl * 1000, n = 1,
              l = label, k = rkey or '', a = {}}
  if sh then le.sh = true end
  s.h[#s.h + 1] = le
  mod(n)
  return le
end
local function join(n, le, alias, ttl)
  le.n = le.n + 1
  if NOW + ttl * 1000 > le.e then
    le.ttl = ttl
    le.e = NOW + ttl * 1000
  end
  if alias ~= le.t then le.a[#le.a + 1] = alias end
  mod(n)
end
local function remove_group(tok, names)
  redis.call('DEL', P .. 'g:' .. tok)
  for _, m in ipairs(names) do
    local sm = load(m)
    if sm then
      local wi = find_waiter(sm, tok)
      if wi then
        table.remove(sm.q, wi)
        mark(m)
      end
    end
  end
end
local function remove_waiter(n, s, wi)
  local w = W(s, wi)
  if w.g then
    remove_group(w.t, w.g)
  else
    table.remove(s.q, wi)
    mark(n)
  end
end
local function group_ready(w)
  for _, m in ipairs(w.g) do
    local sm = load(m)
    if not sm or not sm.q[1] or W(sm, 1).t ~= w.t or #sm.h >= sm.c then
      return false
    end
  end
  return true
end
-- Rule 18: a request of mode sh fits beside the holders (shared: no
-- exclusive holder; exclusive: room left and no shared holder).
local function fits(s, sh)
  for _, le in ipairs(s.h) do
    if sh and not le.sh then return false end
    if not sh and le.sh then return false end
  end
  return sh or #s.h < s.c
end
-- Rule 18: why a shared request is invalid, or nil.
local function shared_misuse(sh, cap, rkey)
  if sh and cap ~= 1 then
    return 'shared mode needs capacity 1 (got ' .. num(cap) ..
           '): a read-write lock has one writer or many readers'
  end
  if sh and rkey ~= '' then
    return 'a reentrancy key cannot be used with shared mode'
  end
  return nil
end
-- Why a try of mode sh on the lock n (state s) is not granted.
local function busy_message(n, s, sh)
  local nsh = 0
  for _, x in ipairs(s.h) do
    if x.sh then nsh = nsh + 1 end
  end
  local what = 'lock ' .. quote(n)
  if not sh and nsh > 0 then
    return what .. ' is held shared by ' .. num(nsh) ..
           (nsh == 1 and ' holder' or ' holders')
  elseif sh and nsh < #s.h then
    return what .. ' is held exclusively'
  elseif #s.h >= s.c then
    return what .. ' is held (' .. num(#s.h) .. ' of ' .. num(s.c) .. ')'
  end
  return what .. ' has ' .. num(#s.q) .. ' waiters ahead of this request'
end
local function pump(n)
  local s = cache[n]
  if not s then return end
  while #s.q > 0 do
    local w = W(s, 1)
    if w.g then
      if not group_ready(w) then return end
      redis.call('DEL', P .. 'g:' .. w.t)
      for _, m in ipairs(w.g) do
        local sm = load(m)
        local gw = W(sm, 1)
        table.remove(sm.q, 1)
        add_lease(m, sm, gw.t, gw.ttl, gw.l, '')
        publish(m, gw, gw.t)
        if m ~= n then mark(m) end
      end
    else
      local le = find_rkey(s, w.k)
      if le and le.n < 4294967295 then
        table.remove(s.q, 1)
        join(n, le, w.t, w.ttl)
        publish_grant(n, s, le, w)
      else
        if not fits(s, w.sh) then return end
        table.remove(s.q, 1)
        local le2 = add_lease(n, s, w.t, w.ttl, w.l, w.k, w.sh)
        le2.r = w.r  -- Redlock: the round that queued it (see acquire)
        publish_grant(n, s, le2, w)
      end
    end
  end
end
-- core::LockTable::advance for one lock: at each due instant, dead waiters
-- leave first, then expired leases, then freed capacity is handed out.
local function advance(n, s)
  local due = {}
  for _, le in ipairs(s.h) do
    if le.e <= NOW then due[#due + 1] = {le.e, 1, le.t} end
  end
  if #s.q > 0 and (s.qd == nil or s.qd <= NOW) then
    unpack_all(s)
    for _, w in ipairs(s.q) do
      local d = dead_at(w)
      if d <= NOW then due[#due + 1] = {d, 0, w.t} end
    end
  end
  if #due == 0 then return end
  table.sort(due, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  for i, ev in ipairs(due) do
    if ev[2] == 0 then
      local wi = find_waiter(s, ev[3])
      if wi then remove_waiter(n, s, wi) end
    else
      for j, le in ipairs(s.h) do
        if le.t == ev[3] then
          table.remove(s.h, j)
          break
        end
      end
      mod(n)
    end
    if i == #due or due[i + 1][1] ~= ev[1] then pump(n) end
  end
end
-- The lock n from its stored value (raw, or already unpacked as u).
local function decode(n, raw, u)
  if not raw then
    cache[n] = false
    return nil
  end
  local s = u or cmsgpack.unpack(raw)
  s.h = s.h or {}
  if s.Q then
    -- Packed waiters; an older baton may have appended unpacked ones.
    for _, w in ipairs(s.q or {}) do
      s.Q[#s.Q + 1] = w
      s.qd = nil
    end
    s.q, s.Q = s.Q, nil
  end
  s.q = s.q or {}
  if s.qd == nil then unpack_all(s) end
  for _, le in ipairs(s.h) do le.a = le.a or {} end
  cache[n] = s
  touched[#touched + 1] = n
  advance(n, s)
  return s
end
load = function(n)
  local s = cache[n]
  if s ~= nil then return s or nil end
  return decode(n, redis.call('GET', P .. 'l:' .. n))
end
local function settle()
  while #dirty > 0 do
    local n = table.remove(dirty)
    pump(n)
  end
end
local function finish(reply)
  settle()
  for _, n in ipairs(touched) do
    local s = cache[n]
    if s and changed[n] then
      if #s.h == 0 and #s.q == 0 then
        redis.call('DEL', P .. 'l:' .. n)
      else
        local last = NOW
        for _, le in ipairs(s.h) do
          if le.e > last then last = le.e end
        end
        local q, lo, hi = s.q, s.qd, s.qm
        s.Q = {}
        for i, x in ipairs(q) do
          if type(x) == 'table' then
            local d = dead_at(x)
            if lo == nil or d < lo then lo = d end
            if hi == nil or d > hi then hi = d end
            x = wpack(x)
          end
          s.Q[i] = x
        end
        if hi and hi > last then last = hi end
        s.q, s.qd, s.qm = nil, lo, hi
        if #s.Q == 0 then s.Q, s.qd, s.qm = nil, nil, nil end
        redis.call('SET', P .. 'l:' .. n, cmsgpack.pack(s), 'PXAT',
                   num(math.floor(last / 1000) + 1000))
        s.q, s.Q = q, nil
      end
    end
  end
  for _, p in ipairs(pubs) do
    redis.call('PUBLISH', P .. p[1], p[2])
  end
  return reply
end
local function grant_reply(n, s, le)
  return {'granted', le.t, le.f, le.ttl, le.n, s.c, num(le.e), num(NOW), n,
          le.sh and 1 or 0}
end
local function holders_of(s)
  local out = {}
  for _, le in ipairs(s.h) do
    local left = math.floor((le.e - NOW) / 1000)
    if left < 0 then left = 0 end
    out[#out + 1] = {le.l, le.f, left, le.n, le.sh and 1 or 0}
  end
  return out
end
local function next_expiry(s)
  local best = 0
  for _, le in ipairs(s.h) do
    if best == 0 or le.e < best then best = le.e end
  end
  return num(best)
end
local function bad_capacity(n, s, cap)
  return {'error', 'invalid_argument', 'lock ' .. quote(n) ..
          ' has capacity ' .. num(s.c) .. '; request asked for ' .. num(cap)}
end
local function describe(n, s)
  local f = tonumber(redis.call('GET', P .. 'f:' .. n) or '0')
  if not s then return {n, 1, num(f), {}, {}} end
  local ws = {}
  unpack_all(s)
  for _, w in ipairs(s.q) do
    local waited = math.floor((NOW - w.ar) / 1000)
    if waited < 0 then waited = 0 end
    ws[#ws + 1] = {w.l, waited, w.g and 1 or 0, w.sh and 1 or 0}
  end
  return {n, s.c, num(f), holders_of(s), ws}
end
)LUA";

}  // namespace baton::store::redis
