// stores/redis/scripts.cc — one Lua script per Store operation. Each is the
// shared prelude (scripts_prelude.cc) followed by its body, as an EVAL
// script and as one function of the library that holds them all (loaded
// once per server, so the prelude's functions are created once, not per
// call). ARGV[1] is always the key prefix. Replies are arrays whose first
// element says what happened.
#include "stores/redis/scripts.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace baton::store::redis {
namespace {

// ARGV: prefix, name, token, ttl_ms, capacity, label, reentrancy key,
// mode (try | wait | refresh | withdraw | yield), wait_ms, inbox[, shared[,
// ticket[, seq]]]. `inbox` (ARGV[10]): the caller's inbox id, kept in its
// waiter record, where its grant or withdrawal is published (see publish in
// the prelude). `shared` (ARGV[11]) '1': a shared (read) request (rule 18).
// The trailing ones are left out when empty (fewer arguments cost the
// common call less); ticket and seq may be empty.
// `refresh` is a waiting thread's re-check: like `wait`, but answers
// `withdrawn` if release() withdrew the request meanwhile. `ticket` (Redlock
// only; absent on redis://: plain arrival order) orders the queue the same
// way on every instance: 0 = assign one (the lock's ticket counter + 1,
// queued at the tail), T > 0 = raise this waiter's ticket to T and move it
// to its place in (ticket, owner token) order. A queued reply carries the
// ticket. `yield` (Redlock, a split that lasted too long) is `wait` with a
// ticket, except that a single hold of this token is first turned back
// into a waiter at the ticket's place, in one step, so the lock goes to
// the queue's head by ticket (perhaps this token again) and a waiter with
// a lower ticket is not overtaken.
// `seq` (ARGV[13], Redlock only) is the sending round's sequence number
// (increasing per process): the lease or waiter of this token remembers the
// highest seq that created or re-found it (`r`), and a `yield` or
// `withdraw` from an older round changes nothing: a script whose call
// timed out on the client may still reach the server after a later round
// of the same token was granted (a delayed network), and must not undo
// that grant (see "Stale clean-ups" in docs/stores/redis.md).
const char* const kAcquireBody = R"LUA(
local name, tok = ARGV[2], ARGV[3]
local ttl, cap = tonumber(ARGV[4]), tonumber(ARGV[5])
local label, rkey, mode = ARGV[6], ARGV[7], ARGV[8]
local waitms = tonumber(ARGV[9])
local inbox = ARGV[10] or ''
local sh = ARGV[11] == '1'  -- rule 18: a shared (read) request
local ticket = tonumber(ARGV[12] or '')
local seq = tonumber(ARGV[13] or '')
if sh then  -- only a shared request can misuse shared mode
  local bad = shared_misuse(sh, cap, rkey)
  if bad then return {'error', 'invalid_argument', bad} end
end
local lk = P .. 'l:' .. name
local raw = redis.call('GET', lk)
if not raw and (mode == 'try' or mode == 'wait') then
  -- Fast path: no lock state at all (nobody holds or waits), so the rules
  -- below reduce to a new lease; write what create/add_lease/finish would.
  -- The reply leaves out what the caller sent (token, ttl, holds 1,
  -- capacity, name, shared).
  local f = redis.call('INCR', P .. 'f:' .. name)
  local e = NOW + ttl * 1000
  local v
  if seq == nil and not sh then
    v = lone_value(tok, f, ttl, e, label, rkey, cap)
  else
    local le = {t = tok, f = f, ttl = ttl, e = e, n = 1, l = label, k = rkey,
                a = {}, r = seq}
    if sh then le.sh = true end
    v = cmsgpack.pack({c = cap, h = {le}, q = {}})
  end
  redis.call('SET', lk, v, 'PXAT', num(math.floor(e / 1000) + 1000))
  return {'g', f, e, NOW}
end
-- True if x (a lease or waiter of tok) was created or re-found by a round
-- after this one: this (delayed) call must not undo it.
local function newer(x)
  return seq ~= nil and x.r ~= nil and x.r > seq
end
-- Records that this round found x (a later round's clean-up may undo it).
local function adopt(x)
  if seq ~= nil and (x.r == nil or x.r < seq) then
    x.r = seq
    mod(name)
  end
end
local function before(a, b)
  return a.o < b.o or (a.o == b.o and a.t < b.t)
end
-- Inserts w by (ticket, token), never ahead of a waiter without a ticket.
local function place(s, w)
  local i = #s.q
  while i >= 1 and W(s, i).o and before(w, W(s, i)) do i = i - 1 end
  table.insert(s.q, i + 1, w)
  if w.o > (s.tk or 0) then s.tk = w.o end
  return i + 1
end
local s = decode(name, raw)
if s then
  if s.c ~= cap then return finish(bad_capacity(name, s, cap)) end
  local le, li = find_lease(s, tok)
  if le and mode == 'yield' and le.n == 1 and ticket and ticket > 0 and
      not newer(le) then
    table.remove(s.h, li)
    local w = {t = tok, ttl = ttl, l = label, k = rkey, ar = NOW,
               d = NOW + waitms * 1000, hb = NOW + HB, o = ticket,
               r = le.r or seq, sh = le.sh, ib = inbox}
    if seq ~= nil and (w.r == nil or w.r < seq) then w.r = seq end
    local pos = place(s, w)
    mark(name)  -- finish() grants the head(s) by ticket
    return finish({'queued', pos, num(NOW), next_expiry(s), num(ticket)})
  end
  if le then
    if mode ~= 'yield' then adopt(le) end
    return finish(grant_reply(name, s, le))
  end
  local wi = find_waiter(s, tok)
  if wi then
    local w = W(s, wi)
    if newer(w) then
      return finish({'queued', wi, num(NOW), next_expiry(s), num(w.o or 0)})
    end
    adopt(w)
    if mode == 'withdraw' or (mode ~= 'try' and waitms <= 0) then
      remove_waiter(name, s, wi)
      return finish({'timeout'})
    end
    if mode == 'wait' or mode == 'refresh' or mode == 'yield' then
      w.d = NOW + waitms * 1000
      w.hb = NOW + HB
      if inbox ~= '' then w.ib = inbox end
      if ticket and ticket > 0 and w.o and w.o < ticket then
        w.o = ticket
        table.remove(s.q, wi)
        wi = place(s, w)
      end
      mod(name)
    end
    return finish({'queued', wi, num(NOW), next_expiry(s), num(w.o or 0)})
  end
  local le2 = find_rkey(s, rkey)
  if le2 and mode ~= 'withdraw' then
    if le2.n >= 4294967295 then
      return finish({'error', 'invalid_argument', 'lock ' .. quote(name) ..
                     ' has reached the maximum hold count'})
    end
    join(name, le2, tok, ttl)
    return finish(grant_reply(name, s, le2))
  end
end
if mode == 'withdraw' then return finish({'timeout'}) end
if mode == 'refresh' then
  if redis.call('EXISTS', P .. 'w:' .. tok .. ':' .. name) == 1 then
    return finish({'withdrawn'})
  end
  mode = 'wait'  -- pruned (missed heartbeats): queue again at the tail
end
if not s or (#s.q == 0 and fits(s, sh)) then
  s = s or create(name, cap)
  local le = add_lease(name, s, tok, ttl, label, rkey, sh)
  le.r = seq
  return finish(grant_reply(name, s, le))
end
if mode == 'try' then
  return finish({'busy', busy_message(name, s, sh), holders_of(s)})
end
if waitms <= 0 then return finish({'timeout'}) end
if #s.q >= MAXQ then
  return finish({'error', 'invalid_argument', 'lock ' .. quote(name) ..
                 ' has ' .. num(#s.q) .. ' waiters; the limit is ' .. num(MAXQ)})
end
local w = {t = tok, ttl = ttl, l = label, k = rkey, ar = NOW,
           d = NOW + waitms * 1000, hb = NOW + HB, r = seq, ib = inbox}
if sh then w.sh = true end
local pos
if ticket then
  w.o = ticket
  if ticket <= 0 then w.o = (s.tk or 0) + 1 end
  pos = place(s, w)
else
  s.q[#s.q + 1] = w
  pos = #s.q
end
mod(name)
redis.call('DEL', P .. 'w:' .. tok .. ':' .. name)
return finish({'queued', pos, num(NOW), next_expiry(s), num(w.o or 0)})
)LUA";

// ARGV: prefix, name, token, ttl_ms.
const char* const kExtendBody = R"LUA(
local name, tok, ttl = ARGV[2], ARGV[3], tonumber(ARGV[4])
local s = load(name)
local le = s and find_lease(s, tok)
if not le then
  return finish({'error', 'lock_lost', 'lock ' .. quote(name) ..
                 ' is not held with this owner token (expired, released ' ..
                 'or never granted)'})
end
le.ttl = ttl
le.e = NOW + ttl * 1000
mod(name)
return finish(grant_reply(name, s, le))
)LUA";

// ARGV: prefix, name, token[, seq]. Reply: released, was_held, holds_left,
// withdrew. With `seq` (Redlock's clean-up of a failed round, see the
// acquire script): a lease or waiter that a later round of this token
// created or re-found (its `r` > seq) is left alone, so a delayed clean-up
// never ends a later grant. Without it (a caller's release): unconditional.
const char* const kReleaseBody = R"LUA(
local name, tok = ARGV[2], ARGV[3]
local seq = tonumber(ARGV[4] or '')
local lk = P .. 'l:' .. name
local raw = redis.call('GET', lk)
if raw then
  -- Fast path: the caller's unexpired single hold, nobody queued: what
  -- advance/remove/finish would do is deleting the lock. A lone value
  -- (see lone_value; no round wrote it, so none is newer) is read without
  -- unpacking it.
  local e = lone_expiry(raw, tok)
  if e and e > NOW then
    redis.call('DEL', lk)
    return {'released', 1, 0, 0}
  end
end
local function newer(x)
  return seq ~= nil and x.r ~= nil and x.r > seq
end
local u = raw and cmsgpack.unpack(raw)
if u and (not u.q or #u.q == 0) and not u.Q and u.h and #u.h == 1 then
  local le = u.h[1]
  if le.t == tok and le.n == 1 and le.e > NOW and (not le.a or #le.a == 0) and
      not newer(le) then
    redis.call('DEL', lk)
    return {'released', 1, 0, 0}
  end
end
local s = decode(name, raw, u)
if not s then return finish({'released', 0, 0, 0}) end
local le, li = find_lease(s, tok)
if le and newer(le) then return finish({'released', 0, 0, 0}) end
if le then
  le.n = le.n - 1
  if le.n == 0 then
    table.remove(s.h, li)
    mark(name)
  else
    mod(name)
  end
  return finish({'released', 1, le.n, 0})
end
local wi = find_waiter(s, tok)
if wi and newer(W(s, wi)) then return finish({'released', 0, 0, 0}) end
if wi then
  local w = W(s, wi)
  remove_waiter(name, s, wi)
  -- Tell the waiting thread (if alive) that its request was withdrawn.
  redis.call('SET', P .. 'w:' .. tok .. ':' .. name, '1', 'PX', 60000)
  publish(name, w, tok)
  return finish({'released', 0, 0, 1})
end
return finish({'released', 0, 0, 0})
)LUA";

// ARGV: prefix, name. Reply: name, capacity, last fencing, holders, waiters.
const char* const kDescribeBody = R"LUA(
local name = ARGV[2]
return finish(describe(name, load(name)))
)LUA";

// ARGV: prefix, names... (found by the client's SCAN). Reply: the describe
// replies of those that have holders or waiters, in the order given.
const char* const kListBody = R"LUA(
local out = {}
for i = 2, #ARGV do
  local n = ARGV[i]
  local s = load(n)
  if s and (#s.h > 0 or #s.q > 0) then out[#out + 1] = describe(n, s) end
end
return finish(out)
)LUA";

// ARGV: prefix, reservation, ttl_ms, capacity, label, all_or_nothing (0|1),
// mode (try | wait | refresh | withdraw), queue_ms, n, names..., seq, inbox
// (seq may be empty; inbox as in acquire)
// `seq` (Redlock only) as in acquire: every lease and waiter of the
// reservation that a reply reports as granted or pending remembers the
// highest round that created or found it, so that a delayed clean-up of an
// older round (release with its seq) leaves it alone.
// `refresh` is a waiting thread's re-check: like `wait`, but answers
// `withdrawn` if release() withdrew the reservation meanwhile (as acquire).
// An all-or-nothing reservation is queued on one set of locks at a time;
// `P g:<reservation>` names that set so another call cannot queue it on
// other locks (two arrivals of one reservation could deadlock).
// Reply: {'multi', pending, now, grants...} or busy / timeout / withdrawn /
// error.
const char* const kMultiBody = R"LUA(
local tok, ttl, cap = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local label, aon, mode = ARGV[5], ARGV[6] == '1', ARGV[7]
local qms, n = tonumber(ARGV[8]), tonumber(ARGV[9])
local names, st, plan = {}, {}, {}
for i = 1, n do names[i] = ARGV[9 + i] end
local seq = tonumber(ARGV[10 + n] or '')
local inbox = ARGV[11 + n] or ''
for i, nm in ipairs(names) do
  local s = load(nm)
  st[i] = s
  plan[i] = 'none'
  if s then
    if s.c ~= cap then return finish(bad_capacity(nm, s, cap)) end
    if find_lease(s, tok) then
      plan[i] = 'held'
    else
      local wi = find_waiter(s, tok)
      if wi then
        plan[i] = 'queued'
        if aon and not W(s, wi).g then
          return finish({'error', 'invalid_argument', 'reservation is ' ..
                         'already queued on lock ' .. quote(nm) ..
                         ' by acquire_some'})
        end
        if not aon and W(s, wi).g then
          return finish({'error', 'invalid_argument', 'reservation is ' ..
                         'already queued on lock ' .. quote(nm) ..
                         ' by acquire_all'})
        end
      end
    end
  end
end
if mode == 'refresh' then
  local any = false
  for i = 1, n do
    if plan[i] ~= 'none' then any = true end
  end
  if not any then
    for i = 1, n do
      if redis.call('EXISTS', P .. 'w:' .. tok .. ':' .. names[i]) == 1 then
        return finish({'withdrawn'})
      end
    end
  end
  mode = 'wait'  -- else as wait (a pruned reservation queues again)
end
local qd = nil
if mode == 'wait' and qms > 0 then qd = NOW + qms * 1000 end
local gkey = P .. 'g:' .. tok
local function free(i)
  local s = st[i]
  return not s or (#s.q == 0 and #s.h < s.c)
end
local function waiter(group)
  local w = {t = tok, ttl = ttl, l = label, k = '', ar = NOW, d = qd,
             ib = inbox}
  if group then
    w.g = group
    w.hb = NOW + HB
  end
  return w
end
local function reply(pending)
  local out = {'multi', pending, num(NOW)}
  for i, nm in ipairs(names) do
    local s = cache[nm]
    local le = s and find_lease(s, tok)
    local wi = s and not le and find_waiter(s, tok)
    local x = le or (wi and W(s, wi))
    if x and seq ~= nil and (x.r == nil or x.r < seq) then
      x.r = seq  -- this round found or made it (see seq above)
      mod(nm)
    end
    if le then out[#out + 1] = grant_reply(nm, s, le) end
  end
  return out
end
local function too_many(i)
  local s = st[i]
  if s and #s.q >= MAXQ then
    return {'error', 'invalid_argument', 'lock ' .. quote(names[i]) ..
            ' has ' .. num(#s.q) .. ' waiters; the limit is ' .. num(MAXQ)}
  end
  return nil
end
if aon then
  local group, all_free, first = nil, true, nil
  for i = 1, n do
    if plan[i] == 'queued' then
      group = W(st[i], find_waiter(st[i], tok)).g
    end
    if plan[i] == 'none' and not free(i) then
      all_free = false
      first = first or i
    end
  end
  if group then
    if mode == 'withdraw' or (mode == 'wait' and not qd) then
      remove_group(tok, group)
      return finish({'timeout'})
    end
    if qd then
      for _, m in ipairs(group) do
        local sm = load(m)
        local w = W(sm, find_waiter(sm, tok))
        w.d = qd
        w.hb = NOW + HB
        mod(m)
      end
      redis.call('SET', gkey, cmsgpack.pack(group), 'PXAT',
                 num(math.floor(qd / 1000) + 1000))
    end
    return finish(reply(#group))
  end
  if mode == 'withdraw' then
    for i = 1, n do
      if plan[i] ~= 'held' then return finish({'timeout'}) end
    end
    return finish(reply(0))
  end
  if all_free then
    for i, nm in ipairs(names) do
      if plan[i] == 'none' then
        local s = st[i] or create(nm, cap)
        st[i] = s
        add_lease(nm, s, tok, ttl, label, '')
      end
    end
    return finish(reply(0))
  end
  if mode == 'try' then
    local s = st[first]
    return finish({'busy', 'lock ' .. quote(names[first]) ..
                   ' is not free (' .. num(#s.h) .. ' of ' .. num(s.c) ..
                   ' held, ' .. num(#s.q) .. ' waiting)', holders_of(s)})
  end
  if not qd then return finish({'timeout'}) end
  local other = redis.call('GET', gkey)
  if other then
    for _, m in ipairs(cmsgpack.unpack(other)) do
      local sm = load(m)
      local wi = sm and find_waiter(sm, tok)
      if wi and W(sm, wi).g then
        return finish({'error', 'invalid_argument', 'reservation is ' ..
                       'already queued on other locks (' .. quote(m) ..
                       ' by acquire_all)'})
      end
    end
  end
  for i = 1, n do
    if plan[i] == 'none' then
      local e = too_many(i)
      if e then return finish(e) end
    end
  end
  local members = {}
  for i, nm in ipairs(names) do
    if plan[i] ~= 'held' then members[#members + 1] = nm end
  end
  for i, nm in ipairs(names) do
    if plan[i] ~= 'held' then
      local s = st[i] or create(nm, cap)
      st[i] = s
      s.q[#s.q + 1] = waiter(members)
      mod(nm)
      redis.call('DEL', P .. 'w:' .. tok .. ':' .. nm)
    end
  end
  redis.call('SET', gkey, cmsgpack.pack(members), 'PXAT',
             num(math.floor(qd / 1000) + 1000))
  return finish(reply(#members))
end
-- acquire_some: every name on its own.
for i = 1, n do
  if plan[i] == 'none' then
    if free(i) then
      plan[i] = 'grant'
    elseif qd then
      local e = too_many(i)
      if e then return finish(e) end
      plan[i] = 'enqueue'
    end
  end
end
local pending = 0
for i, nm in ipairs(names) do
  if plan[i] == 'queued' then
    if qd then
      W(st[i], find_waiter(st[i], tok)).d = qd
      mod(nm)
    end
    pending = pending + 1
  elseif plan[i] == 'grant' then
    local s = st[i] or create(nm, cap)
    st[i] = s
    add_lease(nm, s, tok, ttl, label, '')
  elseif plan[i] == 'enqueue' then
    local s = st[i] or create(nm, cap)
    st[i] = s
    s.q[#s.q + 1] = waiter(nil)
    mod(nm)
    redis.call('DEL', P .. 'w:' .. tok .. ':' .. nm)
    pending = pending + 1
  end
end
return finish(reply(pending))
)LUA";

// ARGV: prefix, name, token, floor. Raises the fencing counter of `name` to
// at least `floor` and sets the lease's fencing token to max(its own, floor)
// (Redlock: the grant's token is the maximum over the majority). Reply
// {'fenced', v}: v = floor when `floor` is this caller's alone here (the
// counter was below it, or this lease's own INCR issued it); else v > floor
// is the least value that may be free: the counter already reached `floor`
// through another grant (its INCR, or its own raise), so two grants would
// share the token; the caller raises again past v.
const char* const kFenceBody = R"LUA(
local name, tok, floor = ARGV[2], ARGV[3], tonumber(ARGV[4])
local fk = P .. 'f:' .. name
local c = tonumber(redis.call('GET', fk) or '0')
local s = load(name)
local le = s and find_lease(s, tok)
if floor > c then
  redis.call('SET', fk, num(floor))
elseif c > floor or not (le and le.f == floor) then
  return finish({'fenced', num(c + 1)})
end
if le and le.f < floor then
  le.f = floor
  mod(name)
end
return finish({'fenced', num(floor)})
)LUA";

// Counters need no prelude. ARGV: prefix, name[, delta | n].
const char* const kCounterGet = R"LUA(
return redis.call('GET', ARGV[1] .. 'c:' .. ARGV[2]) or '0'
)LUA";
const char* const kCounterAdd = R"LUA(
local r = redis.pcall('INCRBY', ARGV[1] .. 'c:' .. ARGV[2], ARGV[3])
if type(r) == 'table' and r.err then return {'overflow', r.err} end
return {'ok', r}
)LUA";
const char* const kCounterTake = R"LUA(
local k = ARGV[1] .. 'c:' .. ARGV[2]
local cur = redis.call('GET', k) or '0'
local n = tonumber(ARGV[3])
if tonumber(cur) < n then return {'short', cur} end
return {'ok', redis.call('DECRBY', k, ARGV[3])}
)LUA";

// ARGV: prefix. The server's time and when its lock data under the prefix
// was born: the time in "<prefix>born", written now if missing (a server
// that never held baton data, or lost it: restarted without persistence,
// flushed). Reply {now_us, born_us}. Leases never read the key, so a
// server where it is missing behaves as before; a client with
// restart_guard counts the server's votes only once the data is older
// than the guard (Pool::votes_from).
const char* const kBorn = R"LUA(
local k = ARGV[1] .. 'born'
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
local b = redis.call('GET', k)
if not b then
  redis.call('SET', k, now)
  b = now
end
return {now, b}
)LUA";

}  // namespace

const Scripts& scripts() {
  static const Scripts* s = [] {
    struct Def {
      Script Scripts::*member;
      const char* name;
      const char* body;
      bool prelude;
    };
    const Def defs[] = {
        {&Scripts::acquire, "acquire", kAcquireBody, true},
        {&Scripts::extend, "extend", kExtendBody, true},
        {&Scripts::release, "release", kReleaseBody, true},
        {&Scripts::describe, "describe", kDescribeBody, true},
        {&Scripts::list, "list", kListBody, true},
        {&Scripts::multi, "multi", kMultiBody, true},
        {&Scripts::fence, "fence", kFenceBody, true},
        {&Scripts::counter_get, "counter_get", kCounterGet, false},
        {&Scripts::counter_add, "counter_add", kCounterAdd, false},
        {&Scripts::counter_take, "counter_take", kCounterTake, false},
        {&Scripts::born, "born", kBorn, false},
    };
    // The library body without names, hashed (FNV-1a 64) to name it.
    std::string body = std::string(kPreludeLibrary) + kPrelude;
    for (const Def& d : defs) body += d.body;
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : body) h = (h ^ c) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(h));
    const std::string lib = std::string("baton_") + hex;

    auto* out = new Scripts();
    out->library = "#!lua name=" + lib + "\n" + kPreludeLibrary + kPrelude;
    for (const Def& d : defs) {
      Script& sc = out->*d.member;
      sc.name = d.name;
      sc.text = d.prelude ? std::string(kPreludeEval) + kPrelude + d.body
                          : std::string(d.body);
      sc.function = lib + "_" + d.name;
      // Counter changes are not idempotent: never re-run after a reset.
      sc.idempotent = std::string_view(d.name) != "counter_add" &&
                      std::string_view(d.name) != "counter_take";
      out->library +=
          "redis.register_function('" + sc.function + "', function(_, args)\n" +
          (d.prelude ? "begin(args)\n" : "ARGV = args\n") + d.body + "\nend)\n";
    }
    return out;
  }();
  return *s;
}

}  // namespace baton::store::redis
