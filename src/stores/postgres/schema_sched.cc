// stores/postgres/schema_sched.cc — the scheduling pass and the lock
// functions of the postgres:// store (PL/pgSQL in a raw string; "@S@" is
// the schema). Semantics mirror core::LockTable (src/core/lock_table.h).
#include "stores/postgres/schema.h"

namespace baton::store::pg {

const char* const kSchemaScheduler = R"SQL(
-- The scheduling pass for one name (every process schedules for
-- everyone). The caller holds the name's advisory lock and has expired what
-- is due. Grants the oldest live requests while capacity allows; an
-- acquire_all head is granted only when it heads every queue it is in and
-- each has capacity (other names are locked with try-lock: if one is busy,
-- its owner or the waiter's next re-check schedules it). p_inline (only
-- where nothing reads holders after the pass in this transaction: the
-- release fast path): a plain grant on a capacity-1 lock becomes the
-- inline holder (one update of the locks row, no holders row).
DROP FUNCTION IF EXISTS @S@._pump(text, timestamptz);
CREATE OR REPLACE FUNCTION @S@._pump(p_name text, p_now timestamptz,
                                     p_inline boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  h @S@.requests;
  m record;
  ok boolean;
  cap int;
  cnt int;
  g @S@.holders;
BEGIN
  LOOP
    SELECT * INTO h FROM @S@.requests WHERE name = p_name
      ORDER BY seq LIMIT 1;
    EXIT WHEN NOT FOUND;
    IF h.kind = 2 THEN
      ok := true;
      FOR m IN SELECT r.name FROM @S@.requests r
                WHERE r.token = h.token AND r.kind = 2 ORDER BY r.name LOOP
        IF m.name <> p_name THEN
          IF NOT pg_try_advisory_xact_lock(@S@._key(m.name)) THEN
            ok := false;
            EXIT;
          END IF;
          PERFORM @S@._expire(m.name, p_now);
        END IF;
        IF (SELECT r.token FROM @S@.requests r WHERE r.name = m.name
             ORDER BY r.seq LIMIT 1) IS DISTINCT FROM h.token
           OR (SELECT count(*) FROM @S@.holders_all x
                WHERE x.name = m.name) >=
              (SELECT l.capacity FROM @S@.locks l WHERE l.name = m.name) THEN
          ok := false;
          EXIT;
        END IF;
      END LOOP;
      IF NOT ok THEN
        -- Dropped meanwhile (its deadline passed): schedule the next head.
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM @S@.requests r
                                   WHERE r.name = p_name AND r.token = h.token);
        EXIT;
      END IF;
      FOR m IN DELETE FROM @S@.requests r
                WHERE r.token = h.token AND r.kind = 2 RETURNING r.* LOOP
        PERFORM @S@._grant(m.name, m.token, m.ttl_ms, m.label, '', p_now);
      END LOOP;
      PERFORM pg_notify('@S@_wake', @S@._hex(h.token));
      CONTINUE;
    END IF;
    IF h.reentrancy_key <> '' THEN
      IF (@S@._join(p_name, h.reentrancy_key, h.token, h.ttl_ms,
                    p_now)).name IS NOT NULL THEN
        DELETE FROM @S@.requests WHERE name = p_name AND token = h.token;
        PERFORM pg_notify('@S@_wake', @S@._hex(h.token));
        CONTINUE;
      END IF;
    END IF;
    IF h.shared THEN
      -- Rule 18: a shared head joins shared holders, never an exclusive one.
      EXIT WHEN EXISTS (SELECT 1 FROM @S@.holders_all
                         WHERE name = p_name AND NOT shared);
    ELSE
      SELECT capacity INTO cap FROM @S@.locks WHERE name = p_name;
      SELECT count(*) INTO cnt FROM @S@.holders_all WHERE name = p_name;
      EXIT WHEN cnt >= coalesce(cap, 1);
    END IF;
    DELETE FROM @S@.requests WHERE name = p_name AND token = h.token;
    IF p_inline AND NOT h.shared AND h.reentrancy_key = '' AND cap = 1 THEN
      -- No holder at all (cnt = 0 above): the inline slot is free.
      PERFORM @S@._durable();  -- (once per handoff)
      UPDATE @S@.locks l SET last_fencing = l.last_fencing + 1,
             h_token = h.token, h_fencing = l.last_fencing + 1,
             h_ttl_ms = h.ttl_ms, h_expires = p_now + @S@._ms(h.ttl_ms),
             h_label = h.label, h_rkey = '', h_shared = false,
             h_granted = p_now
       WHERE l.name = p_name
      RETURNING l.h_fencing, l.h_ttl_ms, l.h_expires
           INTO g.fencing, g.ttl_ms, g.expires_at;
    ELSE
      g := @S@._grant(p_name, h.token, h.ttl_ms, h.label, h.reentrancy_key,
                      p_now, h.shared);
    END IF;
    -- The payload carries the grant, so the waiter needs no re-check:
    -- token:fencing:ttl_ms:expires_us:name (sent only after the commit).
    PERFORM pg_notify('@S@_wake', @S@._hex(h.token) || ':' || g.fencing ||
                      ':' || g.ttl_ms || ':' || @S@._us(g.expires_at) || ':' ||
                      p_name);
  END LOOP;
  PERFORM @S@._settle(p_name);
END $$;

-- Locks, expires and schedules every name; returns the database time the
-- request is served at (after the advisory locks).
CREATE OR REPLACE FUNCTION @S@._begin(p_names text[]) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE v_now timestamptz; x text;
BEGIN
  PERFORM @S@._lock(p_names);
  v_now := clock_timestamp();
  FOREACH x IN ARRAY p_names LOOP
    PERFORM @S@._expire(x, v_now);
    PERFORM @S@._pump(x, v_now);
  END LOOP;
  RETURN v_now;
END $$;

-- acquire: p_mode 'try' (answer now), 'wait' (queue or refresh the queued
-- request: deadline = now + p_wait_ms, heartbeat = now + p_hb_ms),
-- 'recheck' (a waiter's light re-check), 'full' (a waiter's re-check with
-- the full pass; also reports a withdrawal) or 'withdraw' (the caller's
-- wait ended: return the lease if granted, else leave the queue). A
-- 'queued' answer whose code is 'recheck' or 'full' asks the caller to
-- call again at once in that mode. p_shared: a shared (read) request
-- (rule 18; capacity 1, no reentrancy key).
CREATE OR REPLACE FUNCTION @S@.acquire(p_name text, p_token uuid,
    p_ttl_ms bigint, p_capacity int, p_label text, p_rkey text, p_mode text,
    p_wait_ms bigint, p_hb_ms bigint, p_shared boolean DEFAULT false)
RETURNS SETOF @S@.res LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz;
  v_msg text;
  v_cap int;
  v_n bigint;
  h @S@.holders;
  q @S@.requests;
  r @S@.res;
  v_recheck boolean := p_mode IN ('recheck', 'full');
  v_light boolean := p_mode = 'recheck';
  v_ok boolean;
  v_void text;
  v_htok uuid;
  v_hexp timestamptz;
BEGIN
  IF v_recheck THEN
    p_mode := 'wait';
  END IF;
  v_msg := coalesce(@S@._check_name(p_name, 'lock name'),
                    @S@._check_ttl(p_ttl_ms), @S@._check_capacity(p_capacity),
                    CASE WHEN p_shared AND p_capacity <> 1 THEN
                      'shared mode needs capacity 1 (got ' || p_capacity ||
                      '): a read-write lock has one writer or many readers'
                    END,
                    CASE WHEN p_shared AND p_rkey <> '' THEN
                      'a reentrancy key cannot be used with shared mode' END);
  IF v_msg IS NOT NULL THEN
    RETURN NEXT @S@._err('invalid_argument', v_msg);
    RETURN;
  END IF;
  IF v_light AND p_wait_ms > 0 THEN
    -- Light re-check (a waiter's timer, or right after a queueing without
    -- the name's lock). The shared advisory lock waits for a running pass
    -- to commit (so its effects are seen here) and keeps new passes out
    -- only until this commit, which does not wait for the WAL flush:
    -- nothing is granted here, only the heartbeat (and deadline) is
    -- refreshed, at most every quarter heartbeat (losing it in a crash
    -- only makes the heartbeat older). While the caller's plain request is
    -- queued behind live leases that fill the lock and nothing on the name
    -- is due, a pass could grant nothing, and any later pass sees the
    -- request. Otherwise the answer asks for the full pass at once
    -- (code 'full'). The shared lock is never upgraded (no deadlock).
    v_void := pg_advisory_xact_lock_shared(@S@._key(p_name))::text;
    v_void := set_config('synchronous_commit', 'off', true);
    v_now := clock_timestamp();
    SELECT coalesce(max(capacity), 1) INTO v_cap FROM @S@.locks
     WHERE name = p_name;
    SELECT * INTO h FROM @S@.holders_all
     WHERE name = p_name AND (token = p_token OR p_token = ANY (aliases))
       AND expires_at > v_now;
    IF FOUND THEN  -- granted meanwhile (committed durably)
      RETURN NEXT @S@._grant_row(h, v_cap, v_now);
      RETURN;
    END IF;
    SELECT * INTO q FROM @S@.requests WHERE name = p_name AND token = p_token;
    v_ok := coalesce(FOUND AND q.kind = 0 AND NOT q.shared
       AND q.deadline > v_now
       AND q.heartbeat_until > v_now
       AND NOT EXISTS (SELECT 1 FROM @S@.holders_all
                        WHERE name = p_name AND expires_at <= v_now)
       AND (SELECT count(*) FROM @S@.holders_all
             WHERE name = p_name) >= v_cap
       AND NOT EXISTS (SELECT 1 FROM @S@.requests
                        WHERE name = p_name
                          AND (deadline <= v_now OR heartbeat_until <= v_now)),
       false);
    IF v_ok AND q.heartbeat_until < v_now + @S@._ms(p_hb_ms * 3 / 4) THEN
      UPDATE @S@.requests SET deadline = v_now + @S@._ms(p_wait_ms),
             heartbeat_until = v_now + @S@._ms(p_hb_ms)
       WHERE name = p_name AND token = p_token;
      v_ok := FOUND;
    END IF;
    IF v_ok THEN
      SELECT count(*) INTO v_n FROM @S@.requests
       WHERE name = p_name AND seq <= q.seq;
    END IF;
    r := ROW('queued', p_name, p_token, NULL, p_ttl_ms, NULL, v_cap, NULL,
             @S@._us(v_now), NULL, v_n, NULL,
             CASE WHEN v_ok THEN NULL ELSE 'full' END, NULL);
    RETURN NEXT r;
    RETURN;
  END IF;
  IF p_mode = 'wait' AND NOT v_recheck AND p_wait_ms > 0 AND p_rkey = ''
     AND NOT p_shared THEN
    -- Queueing behind a busy lock (version 7: one round trip, no flush).
    -- Only when the lock is full of live leases (none of them this
    -- caller's) with this capacity: a pass could grant nothing now. A look
    -- without a lock picks the path; then the name's advisory lock in
    -- shared mode waits for a running pass to commit (the queries below,
    -- each with a new snapshot, see its outcome) and keeps new passes out
    -- until this commit, so every later pass sees the request. If the
    -- look was wrong, the answer asks for the full pass (code 'full'): a
    -- transaction holding the shared lock never asks for the exclusive one
    -- (no upgrade, no deadlock). The queue entry commits without waiting
    -- for the WAL flush: a grant of it commits durably after it (the WAL
    -- is written in order), and an entry a crash loses is queued again by
    -- the waiter's next re-check (the listener's reconnect wakes every
    -- waiter).
    -- (A live inline holder means the name has no holders row: every
    -- path that inserts one moves the inline holder out first.)
    v_now := clock_timestamp();
    SELECT capacity, h_token, h_expires INTO v_cap, v_htok, v_hexp
      FROM @S@.locks WHERE name = p_name;
    IF v_cap = p_capacity
       AND (CASE WHEN v_htok IS NOT NULL
                 THEN v_cap = 1 AND v_htok <> p_token AND v_hexp > v_now
                 ELSE EXISTS (SELECT 1 FROM @S@.holders
                               WHERE name = p_name AND expires_at > v_now
                                 AND token <> p_token) END) THEN
      v_void := pg_advisory_xact_lock_shared(@S@._key(p_name))::text;
      v_now := clock_timestamp();
      SELECT capacity, h_token, h_expires INTO v_cap, v_htok, v_hexp
        FROM @S@.locks WHERE name = p_name;
      IF v_htok IS NOT NULL THEN
        -- Full with one live holder that is not this caller (a retry of
        -- a queued request inserts nothing below and takes the pass).
        v_ok := coalesce(v_cap = p_capacity AND v_cap = 1
                         AND v_htok <> p_token AND v_hexp > v_now, false);
      ELSE
        v_ok := coalesce(v_cap = p_capacity
           AND (SELECT count(*) FROM @S@.holders
                 WHERE name = p_name AND expires_at > v_now) >= v_cap
           AND NOT EXISTS (SELECT 1 FROM @S@.holders
                            WHERE name = p_name AND (expires_at <= v_now
                              OR token = p_token OR p_token = ANY (aliases)))
           AND NOT EXISTS (SELECT 1 FROM @S@.requests
                            WHERE name = p_name AND token = p_token), false);
      END IF;
      IF v_ok THEN
        INSERT INTO @S@.requests (name, token, seq, kind, ttl_ms, label,
                                  reentrancy_key, arrived_at, deadline,
                                  heartbeat_until)
        VALUES (p_name, p_token, nextval('@S@.request_seq'), 0, p_ttl_ms,
                p_label, '', v_now, v_now + @S@._ms(p_wait_ms),
                v_now + @S@._ms(p_hb_ms))
        ON CONFLICT DO NOTHING;
        v_ok := FOUND;
      END IF;
      IF v_ok THEN
        v_void := set_config('synchronous_commit', 'off', true);
        SELECT count(*) INTO v_n FROM @S@.requests WHERE name = p_name;
      END IF;
      r := ROW('queued', p_name, p_token, NULL, p_ttl_ms, NULL, v_cap,
               NULL, @S@._us(v_now), NULL, v_n, NULL,
               CASE WHEN v_ok THEN NULL ELSE 'full' END, NULL);
      RETURN NEXT r;
      RETURN;
    END IF;
  END IF;
  IF NOT v_recheck THEN
    -- Fast path: an idle name (no queue, no holders row, no live inline
    -- holder) is granted here: its advisory lock and one update of its
    -- locks row (fencing counter + inline holder; HOT), or one insert on
    -- first use. An expired inline holder is replaced (its lease is over).
    -- (Calls of functions without a table are assigned, not PERFORMed: an
    -- assignment is a "simple expression", evaluated without starting an
    -- executor; PERFORM runs a query.)
    v_void := pg_advisory_xact_lock(@S@._key(p_name))::text;
    v_now := clock_timestamp();
    UPDATE @S@.locks l SET capacity = p_capacity,
           last_fencing = l.last_fencing + 1,
           h_token = p_token, h_fencing = l.last_fencing + 1,
           h_ttl_ms = p_ttl_ms, h_expires = v_now + @S@._ms(p_ttl_ms),
           h_label = p_label, h_rkey = p_rkey, h_shared = p_shared,
           h_granted = v_now
     WHERE l.name = p_name AND (l.h_token IS NULL OR l.h_expires <= v_now)
       AND NOT EXISTS (SELECT 1 FROM @S@.requests WHERE name = p_name)
       AND NOT EXISTS (SELECT 1 FROM @S@.holders WHERE name = p_name)
    RETURNING l.h_fencing INTO v_n;
    -- First use of the name (no locks row, hence no holder or request:
    -- every grant and every queueing creates the row first).
    IF NOT FOUND THEN
      IF NOT EXISTS (SELECT 1 FROM @S@.locks WHERE name = p_name) THEN
        INSERT INTO @S@.locks (name, capacity, last_fencing, h_token,
                               h_fencing, h_ttl_ms, h_expires, h_label,
                               h_rkey, h_shared, h_granted)
        VALUES (p_name, p_capacity, 1, p_token, 1, p_ttl_ms,
                v_now + @S@._ms(p_ttl_ms), p_label, p_rkey, p_shared, v_now)
        ON CONFLICT (name) DO NOTHING
        RETURNING h_fencing INTO v_n;
      END IF;
    END IF;
    IF v_n IS NOT NULL THEN
      -- A grant commits durably (_durable(); read at the commit).
      IF current_setting('synchronous_commit') = 'off' THEN
        v_void := set_config('synchronous_commit', 'on', true);
      END IF;
      -- The row _grant_row would make.
      r := ROW('grant', p_name, p_token, v_n, p_ttl_ms, 1, p_capacity,
               @S@._us(v_now + @S@._ms(p_ttl_ms)), @S@._us(v_now), p_label,
               NULL, p_shared, NULL, NULL);
      RETURN NEXT r;
      RETURN;
    END IF;
    -- Busy (a live inline holder, holders rows or a queue): the full pass.
  END IF;
  v_now := @S@._begin(ARRAY[p_name]);
  SELECT capacity INTO v_cap FROM @S@.locks WHERE name = p_name;
  v_msg := @S@._capacity_conflict(p_name, p_capacity);
  IF v_msg IS NOT NULL THEN
    RETURN NEXT @S@._err('invalid_argument', v_msg);
    RETURN;
  END IF;
  -- Idempotent retry of a granted request (or a reentrant alias).
  SELECT * INTO h FROM @S@.holders
   WHERE name = p_name AND (token = p_token OR p_token = ANY (aliases));
  IF FOUND THEN
    RETURN NEXT @S@._grant_row(h, v_cap, v_now);
    RETURN;
  END IF;
  -- Retry of a queued request: it keeps its place.
  SELECT * INTO q FROM @S@.requests WHERE name = p_name AND token = p_token;
  IF FOUND THEN
    IF p_mode = 'withdraw' OR (p_mode = 'wait' AND p_wait_ms <= 0) THEN
      IF q.kind = 2 THEN
        PERFORM @S@._drop_group(q.token);
      ELSE
        DELETE FROM @S@.requests WHERE name = p_name AND token = p_token;
      END IF;
      PERFORM @S@._pump(p_name, v_now);
      RETURN NEXT @S@._err('timeout', 'wait deadline for lock ' ||
                           @S@._quote(p_name) || ' passed');
      RETURN;
    END IF;
    IF p_mode = 'wait' THEN
      UPDATE @S@.requests SET deadline = v_now + @S@._ms(p_wait_ms),
             heartbeat_until = CASE WHEN kind = 1 THEN NULL
                                    ELSE v_now + @S@._ms(p_hb_ms) END
       WHERE name = p_name AND token = p_token;
    END IF;
    SELECT count(*) INTO v_n FROM @S@.requests
     WHERE name = p_name AND seq <= q.seq;
    r := ROW('queued', p_name, p_token, NULL, p_ttl_ms, NULL, v_cap, NULL,
             @S@._us(v_now), NULL, v_n, NULL, NULL, NULL);
    RETURN NEXT r;
    RETURN;
  END IF;
  -- A waiting caller whose request release() withdrew.
  IF v_recheck AND EXISTS (SELECT 1 FROM @S@.withdrawn
                            WHERE name = p_name AND token = p_token) THEN
    DELETE FROM @S@.withdrawn WHERE name = p_name AND token = p_token;
    RETURN NEXT @S@._err('not_acquired', 'the request for lock ' ||
                         @S@._quote(p_name) || ' was withdrawn while it waited');
    RETURN;
  END IF;
  -- Reentrant join.
  IF p_rkey <> '' THEN
    SELECT * INTO h FROM @S@.holders
     WHERE name = p_name AND reentrancy_key = p_rkey;
    IF FOUND THEN
      IF h.holds >= 2147483647 THEN
        RETURN NEXT @S@._err('invalid_argument', 'lock ' ||
            @S@._quote(p_name) || ' has reached the maximum hold count');
        RETURN;
      END IF;
      h := @S@._join(p_name, p_rkey, p_token, p_ttl_ms, v_now);
      RETURN NEXT @S@._grant_row(h, v_cap, v_now);
      RETURN;
    END IF;
  END IF;
  IF @S@._free(p_name, p_shared) THEN
    h := @S@._grant_new(p_name, p_token, p_ttl_ms, p_capacity, p_label,
                        p_rkey, v_now, p_shared);
    RETURN NEXT @S@._grant_row(h, p_capacity, v_now);
    RETURN;
  END IF;
  IF p_mode = 'try' THEN
    SELECT count(*) INTO v_n FROM @S@.holders WHERE name = p_name;
    IF NOT p_shared AND EXISTS (SELECT 1 FROM @S@.holders
                                 WHERE name = p_name AND shared) THEN
      v_msg := ' is held shared by ' || v_n ||
               CASE WHEN v_n = 1 THEN ' holder' ELSE ' holders' END;
    ELSIF p_shared AND EXISTS (SELECT 1 FROM @S@.holders
                                WHERE name = p_name AND NOT shared) THEN
      v_msg := ' is held exclusively';
    ELSIF v_n >= v_cap THEN
      v_msg := ' is held (' || v_n || ' of ' || v_cap || ')';
    ELSE
      SELECT count(*) INTO v_n FROM @S@.requests WHERE name = p_name;
      v_msg := ' has ' || v_n || ' waiters ahead of this request';
    END IF;
    RETURN NEXT @S@._err('not_acquired', 'lock ' || @S@._quote(p_name) ||
                         v_msg);
    RETURN QUERY SELECT * FROM @S@._holder_rows(p_name, v_now);
    RETURN;
  END IF;
  IF p_mode = 'withdraw' OR p_wait_ms <= 0 THEN
    RETURN NEXT @S@._err('timeout', 'wait deadline for lock ' ||
                         @S@._quote(p_name) || ' passed before it was free');
    RETURN;
  END IF;
  PERFORM @S@._enqueue(p_name, p_token, nextval('@S@.request_seq'), 0,
                       p_ttl_ms, p_label, p_rkey, v_now,
                       v_now + @S@._ms(p_wait_ms), v_now + @S@._ms(p_hb_ms),
                       p_shared);
  SELECT count(*) INTO v_n FROM @S@.requests WHERE name = p_name;
  r := ROW('queued', p_name, p_token, NULL, p_ttl_ms, NULL, v_cap, NULL,
           @S@._us(v_now), NULL, v_n, NULL, NULL, NULL);
  RETURN NEXT r;
END $$;

-- extend: expiry = database now + ttl, only for the live lease (rule 4).
CREATE OR REPLACE FUNCTION @S@.extend(p_name text, p_token uuid,
                                      p_ttl_ms bigint)
RETURNS SETOF @S@.res LANGUAGE plpgsql AS $$
DECLARE v_now timestamptz; v_msg text; h @S@.holders; v_cap int;
        v_void text;
BEGIN
  v_msg := coalesce(@S@._check_name(p_name, 'lock name'),
                    @S@._check_ttl(p_ttl_ms));
  IF v_msg IS NOT NULL THEN
    RETURN NEXT @S@._err('invalid_argument', v_msg);
    RETURN;
  END IF;
  -- Fast path: the inline holder of a name nobody waits for.
  v_void := pg_advisory_xact_lock(@S@._key(p_name))::text;
  v_now := clock_timestamp();
  IF NOT EXISTS (SELECT 1 FROM @S@.requests WHERE name = p_name) THEN
    UPDATE @S@.locks SET h_ttl_ms = p_ttl_ms,
           h_expires = v_now + @S@._ms(p_ttl_ms)
     WHERE name = p_name AND h_token = p_token AND h_expires > v_now
    RETURNING capacity INTO v_cap;
    IF FOUND THEN
      SELECT * INTO h FROM @S@.holders_all
       WHERE name = p_name AND token = p_token;
      RETURN NEXT @S@._grant_row(h, v_cap, v_now);
      RETURN;
    END IF;
  END IF;
  v_now := @S@._begin(ARRAY[p_name]);
  UPDATE @S@.holders SET ttl_ms = p_ttl_ms,
         expires_at = v_now + @S@._ms(p_ttl_ms)
   WHERE name = p_name AND (token = p_token OR p_token = ANY (aliases))
  RETURNING * INTO h;
  IF NOT FOUND THEN
    RETURN NEXT @S@._err('lock_lost', 'lock ' || @S@._quote(p_name) ||
        ' is not held with this owner token (expired, released or never '
        'granted)');
    RETURN;
  END IF;
  SELECT capacity INTO v_cap FROM @S@.locks WHERE name = p_name;
  RETURN NEXT @S@._grant_row(h, v_cap, v_now);
END $$;

-- release: one hold of the lease with this token (or alias), or withdraws
-- a queued request with it; then schedules the name (rule 5).
CREATE OR REPLACE FUNCTION @S@.release(p_name text, p_token uuid)
RETURNS SETOF @S@.res LANGUAGE plpgsql AS $$
DECLARE v_now timestamptz; v_msg text; h @S@.holders; q @S@.requests;
        r @S@.res; v_held boolean := false; v_left int := 0; v_void text;
BEGIN
  v_msg := @S@._check_name(p_name, 'lock name');
  IF v_msg IS NOT NULL THEN
    RETURN NEXT @S@._err('invalid_argument', v_msg);
    RETURN;
  END IF;
  -- Fast path: the last hold of a live lease. With nobody queued nothing
  -- is handed over, so the commit need not wait for the WAL flush: if a
  -- crash loses it, the lease only lives on until its expiry (no one else
  -- was granted anything), and any later grant's durable commit flushes it.
  -- The inline holder is one update of the locks row (HOT).
  v_void := pg_advisory_xact_lock(@S@._key(p_name))::text;
  v_now := clock_timestamp();
  -- Hand-over (version 7): the live inline holder of a capacity-1 lock
  -- whose head request is a plain live one makes that request the inline
  -- holder in the same update (one fencing token more), deletes it and
  -- tells its waiter with the grant in the payload. Nothing else on the
  -- name can change the outcome: an inline holder means there is no
  -- holders row, and a head that is due, shared, reentrant or part of an
  -- acquire_all takes the full pass below. Requests due behind the head
  -- stay until a pass reaches them (they block nobody meanwhile).
  SELECT * INTO q FROM @S@.requests WHERE name = p_name ORDER BY seq LIMIT 1;
  IF FOUND AND q.kind = 0 AND NOT q.shared AND q.reentrancy_key = ''
     AND q.deadline > v_now AND q.heartbeat_until > v_now THEN
    UPDATE @S@.locks l SET last_fencing = l.last_fencing + 1,
           h_token = q.token, h_fencing = l.last_fencing + 1,
           h_ttl_ms = q.ttl_ms, h_expires = v_now + @S@._ms(q.ttl_ms),
           h_label = q.label, h_rkey = '', h_shared = false,
           h_granted = v_now
     WHERE l.name = p_name AND l.h_token = p_token AND l.h_expires > v_now
       AND l.capacity = 1
    RETURNING l.h_fencing, l.h_expires INTO h.fencing, h.expires_at;
    IF FOUND THEN
      DELETE FROM @S@.requests WHERE name = p_name AND token = q.token;
      IF current_setting('synchronous_commit') = 'off' THEN
        v_void := set_config('synchronous_commit', 'on', true);
      END IF;
      -- (the payload _pump sends: token:fencing:ttl_ms:expires_us:name)
      v_void := pg_notify('@S@_wake', @S@._hex(q.token) || ':' ||
                          h.fencing || ':' || q.ttl_ms || ':' ||
                          @S@._us(h.expires_at) || ':' || p_name)::text;
      r := ROW('status', p_name, NULL, NULL, NULL, 0, NULL, NULL,
               @S@._us(v_now), NULL, 0, true, NULL, NULL);
      RETURN NEXT r;
      RETURN;
    END IF;
  END IF;
  UPDATE @S@.locks SET h_token = NULL
   WHERE name = p_name AND h_token = p_token AND h_expires > v_now;
  IF NOT FOUND THEN
    DELETE FROM @S@.holders WHERE name = p_name AND token = p_token
       AND holds = 1 AND expires_at > v_now;
  END IF;
  IF FOUND THEN
    IF EXISTS (SELECT 1 FROM @S@.requests WHERE name = p_name) THEN
      PERFORM @S@._expire(p_name, v_now);
      PERFORM @S@._pump(p_name, v_now, true);
    ELSE
      v_void := set_config('synchronous_commit', 'off', true);
      -- (a queue drained by hand-overs, or the last holders row gone)
      PERFORM @S@._settle(p_name);
    END IF;
    r := ROW('status', p_name, NULL, NULL, NULL, 0, NULL, NULL,
             @S@._us(v_now), NULL, 0, true, NULL, NULL);
    RETURN NEXT r;
    RETURN;
  END IF;
  v_now := @S@._begin(ARRAY[p_name]);
  UPDATE @S@.holders SET holds = holds - 1
   WHERE name = p_name AND (token = p_token OR p_token = ANY (aliases))
  RETURNING * INTO h;
  IF FOUND THEN
    v_held := true;
    v_left := h.holds;
    IF h.holds = 0 THEN
      DELETE FROM @S@.holders WHERE name = p_name AND token = h.token;
    END IF;
  ELSE
    SELECT * INTO q FROM @S@.requests WHERE name = p_name AND token = p_token;
    IF FOUND THEN
      INSERT INTO @S@.withdrawn (name, token, until)
      SELECT name, token, v_now + interval '1 minute' FROM @S@.requests
       WHERE token = p_token AND (name = p_name OR kind = 2)
      ON CONFLICT DO NOTHING;
      IF q.kind = 2 THEN
        PERFORM @S@._drop_group(q.token);
      ELSE
        DELETE FROM @S@.requests WHERE name = p_name AND token = p_token;
        PERFORM pg_notify('@S@_wake', @S@._hex(p_token));
      END IF;
    END IF;
  END IF;
  PERFORM @S@._pump(p_name, v_now);
  r := ROW('status', p_name, NULL, NULL, NULL, v_left, NULL, NULL,
           @S@._us(v_now), NULL, v_left, v_held, NULL, NULL);
  RETURN NEXT r;
END $$;
)SQL";

}  // namespace baton::store::pg
