// stores/postgres/schema_tables.cc — the postgres:// store's tables, result
// type and helper functions (SQL in a raw string). "@S@" is replaced by the
// store's PostgreSQL schema name. See docs/stores/postgres.md.
#include "stores/postgres/schema.h"

namespace baton::store::pg {

// Version 8 (see kSchemaVersion). Every statement is idempotent (IF NOT EXISTS,
// CREATE OR REPLACE) and the whole script runs under a transaction-scoped
// advisory lock, so concurrent first starts do not race.
const char* const kSchemaTables = R"SQL(
CREATE SCHEMA IF NOT EXISTS @S@;

CREATE TABLE IF NOT EXISTS @S@.schema_version (
  version    int PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now()
);

-- One row per lock name ever used: its capacity while it is in use and its
-- fencing counter. Never deleted, so fencing tokens never repeat.
CREATE TABLE IF NOT EXISTS @S@.locks (
  name         text PRIMARY KEY,
  capacity     int NOT NULL DEFAULT 1,
  last_fencing bigint NOT NULL DEFAULT 0
);

-- Current holders (leases). Times are database times.
CREATE TABLE IF NOT EXISTS @S@.holders (
  name           text NOT NULL,
  token          uuid NOT NULL,
  fencing        bigint NOT NULL,
  ttl_ms         bigint NOT NULL,
  expires_at     timestamptz NOT NULL,
  holds          int NOT NULL DEFAULT 1,
  label          text NOT NULL DEFAULT '',
  reentrancy_key text NOT NULL DEFAULT '',
  aliases        uuid[] NOT NULL DEFAULT '{}',
  granted_at     timestamptz NOT NULL,
  PRIMARY KEY (name, token)
);

-- The request queue. seq is the arrival order;
-- the requests of one acquire_all reservation share one seq.
CREATE SEQUENCE IF NOT EXISTS @S@.request_seq;
CREATE TABLE IF NOT EXISTS @S@.requests (
  name            text NOT NULL,
  token           uuid NOT NULL,      -- owner token or reservation id
  seq             bigint NOT NULL,
  kind            smallint NOT NULL,  -- 0 acquire, 1 acquire_some, 2 acquire_all
  ttl_ms          bigint NOT NULL,
  label           text NOT NULL DEFAULT '',
  reentrancy_key  text NOT NULL DEFAULT '',
  arrived_at      timestamptz NOT NULL,
  deadline        timestamptz NOT NULL,
  heartbeat_until timestamptz,        -- NULL: no heartbeat (acquire_some)
  PRIMARY KEY (name, token)
);
CREATE INDEX IF NOT EXISTS requests_queue ON @S@.requests (name, seq);

-- Version 4: shared (read) leases and requests (rule 18).
ALTER TABLE @S@.holders ADD COLUMN IF NOT EXISTS shared boolean NOT NULL
  DEFAULT false;
ALTER TABLE @S@.requests ADD COLUMN IF NOT EXISTS shared boolean NOT NULL
  DEFAULT false;
-- Functions whose parameter lists grew in version 4 (a new overload would
-- make calls with the old argument count ambiguous).
DROP FUNCTION IF EXISTS @S@._grant_new(text, uuid, bigint, int, text, text,
                                       timestamptz);
DROP FUNCTION IF EXISTS @S@._grant(text, uuid, bigint, text, text,
                                   timestamptz);
DROP FUNCTION IF EXISTS @S@._enqueue(text, uuid, bigint, int, bigint, text,
                                     text, timestamptz, timestamptz,
                                     timestamptz);
DROP FUNCTION IF EXISTS @S@._free(text);
DROP FUNCTION IF EXISTS @S@.acquire(text, uuid, bigint, int, text, text, text,
                                    bigint, bigint);
CREATE INDEX IF NOT EXISTS requests_token ON @S@.requests (token);

-- Version 5: a lock's only holder kept in its locks row (the "inline"
-- holder, h_token not NULL) by the uncontended fast paths, so an acquire
-- and a release each change that one row (HOT updates: no indexed column
-- changes) instead of inserting and deleting a holders row. Every path
-- that takes the name's advisory lock for more than the fast path first
-- moves it into holders (_spill, from _expire), so the scheduling code
-- sees all holders in one table; lock-free readers use holders_all.
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS h_token uuid;
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS h_fencing bigint;
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS h_ttl_ms bigint;
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS h_expires timestamptz;
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS h_label text;
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS h_rkey text;
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS h_shared boolean;
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS h_granted timestamptz;

-- Version 8: whether a name may have requests (has_queue) or holders
-- rows (has_holders), in its locks row, so that the one-statement fast
-- paths decide from that row alone (docs/stores/postgres.md, "Fast
-- paths"). A flag is set (by the trigger _mark) in the transaction that
-- inserts the name's first such row, so a name with such rows always has
-- it set; it is cleared (_settle) only under the name's exclusive advisory
-- lock, when no such row is left. A flag set without rows only sends calls
-- to the functions. Computed here from the tables: the ALTER TABLEs above
-- hold ACCESS EXCLUSIVE locks on holders, requests and locks until this
-- script commits, so no write comes between these reads and the trigger.
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS has_queue boolean NOT NULL
  DEFAULT false;
ALTER TABLE @S@.locks ADD COLUMN IF NOT EXISTS has_holders boolean NOT NULL
  DEFAULT false;
INSERT INTO @S@.locks (name)
  SELECT name FROM @S@.requests UNION SELECT name FROM @S@.holders
ON CONFLICT DO NOTHING;
UPDATE @S@.locks l SET
    has_queue = EXISTS (SELECT 1 FROM @S@.requests r WHERE r.name = l.name),
    has_holders = EXISTS (SELECT 1 FROM @S@.holders h WHERE h.name = l.name)
 WHERE l.has_queue OR l.has_holders
    OR l.name IN (SELECT name FROM @S@.requests UNION
                  SELECT name FROM @S@.holders);

-- A row of requests (or holders) came: its name's flag is set in the same
-- transaction (the locks row is read first, and written only if the flag
-- is not set yet, so waiters queueing on a busy name do not queue on that
-- row). The locks row exists whenever a request or a lease does; the
-- insert covers a name without one all the same.
CREATE OR REPLACE FUNCTION @S@._mark() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE v_queue boolean := TG_TABLE_NAME = 'requests'; v_set boolean;
BEGIN
  SELECT CASE WHEN v_queue THEN has_queue ELSE has_holders END INTO v_set
    FROM @S@.locks WHERE name = NEW.name;
  IF v_set IS NULL THEN
    INSERT INTO @S@.locks AS l (name, has_queue, has_holders)
    VALUES (NEW.name, v_queue, NOT v_queue)
    ON CONFLICT (name) DO UPDATE
      SET has_queue = l.has_queue OR v_queue,
          has_holders = l.has_holders OR NOT v_queue;
  ELSIF NOT v_set THEN
    UPDATE @S@.locks SET has_queue = has_queue OR v_queue,
                         has_holders = has_holders OR NOT v_queue
     WHERE name = NEW.name;
  END IF;
  RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS requests_mark ON @S@.requests;
CREATE TRIGGER requests_mark AFTER INSERT OR UPDATE OF name
  ON @S@.requests FOR EACH ROW EXECUTE FUNCTION @S@._mark();
DROP TRIGGER IF EXISTS holders_mark ON @S@.holders;
CREATE TRIGGER holders_mark AFTER INSERT OR UPDATE OF name
  ON @S@.holders FOR EACH ROW EXECUTE FUNCTION @S@._mark();

-- Clears a name's flags that no row backs any more. The caller holds the
-- name's exclusive advisory lock (nobody adds a row meanwhile); a flag is
-- written only when it changes.
CREATE OR REPLACE FUNCTION @S@._settle(p_name text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE @S@.locks l SET
      has_queue = l.has_queue
                  AND EXISTS (SELECT 1 FROM @S@.requests WHERE name = p_name),
      has_holders = l.has_holders
                    AND EXISTS (SELECT 1 FROM @S@.holders WHERE name = p_name)
   WHERE l.name = p_name AND (l.has_queue OR l.has_holders)
     AND ((l.has_queue AND NOT EXISTS (SELECT 1 FROM @S@.requests
                                        WHERE name = p_name))
          OR (l.has_holders AND NOT EXISTS (SELECT 1 FROM @S@.holders
                                             WHERE name = p_name)));
END $$;

-- Every holder: the holders rows and the inline ones (same columns as
-- holders, so a row of it reads into a @S@.holders variable).
CREATE OR REPLACE VIEW @S@.holders_all AS
  SELECT name, token, fencing, ttl_ms, expires_at, holds, label,
         reentrancy_key, aliases, granted_at, shared
    FROM @S@.holders
  UNION ALL
  SELECT name, h_token, h_fencing, h_ttl_ms, h_expires, 1, h_label, h_rkey,
         '{}'::uuid[], h_granted, h_shared
    FROM @S@.locks WHERE h_token IS NOT NULL;

-- Moves a name's inline holder into holders (dropped if expired). The
-- caller holds the name's advisory lock.
CREATE OR REPLACE FUNCTION @S@._spill(p_name text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE l @S@.locks;
BEGIN
  SELECT * INTO l FROM @S@.locks WHERE name = p_name AND h_token IS NOT NULL;
  IF NOT FOUND THEN RETURN; END IF;
  UPDATE @S@.locks SET h_token = NULL WHERE name = p_name;
  IF l.h_expires > p_now THEN
    INSERT INTO @S@.holders (name, token, fencing, ttl_ms, expires_at, holds,
                             label, reentrancy_key, aliases, granted_at,
                             shared)
    VALUES (p_name, l.h_token, l.h_fencing, l.h_ttl_ms, l.h_expires, 1,
            l.h_label, l.h_rkey, '{}', l.h_granted, l.h_shared)
    ON CONFLICT DO NOTHING;
  END IF;
END $$;

-- Requests withdrawn by release() while their caller still waits: the
-- caller's next re-check reports the withdrawal instead of queueing again.
CREATE TABLE IF NOT EXISTS @S@.withdrawn (
  name  text NOT NULL,
  token uuid NOT NULL,
  until timestamptz NOT NULL,
  PRIMARY KEY (name, token)
);

CREATE TABLE IF NOT EXISTS @S@.counters (
  name  text PRIMARY KEY,
  value bigint NOT NULL
);

-- Highest fencing token seen per protected resource (fenced_write).
CREATE TABLE IF NOT EXISTS @S@.fences (
  resource text PRIMARY KEY,
  highest  bigint NOT NULL
);

DO $$ BEGIN
  IF to_regtype('@S@.res') IS NULL THEN
    CREATE TYPE @S@.res AS (
      kind       text,    -- grant | queued | status | holder | waiter | lock | error
      name       text,
      token      uuid,
      fencing    bigint,
      ttl_ms     bigint,
      holds      int,
      capacity   int,
      expires_us bigint,  -- database clock, Unix epoch microseconds
      now_us     bigint,  -- database clock when the request was served
      label      text,
      n          bigint,  -- position / pending / time left or waited (ms) / value
      flag       boolean, -- was_held / all_or_nothing / shared (grant, holder)
      code       text,    -- error code name; 'shared' on a shared waiter
      msg        text
    );
  END IF;
END $$;

-- (STABLE like extract() on timestamptz, so the planner inlines it: a
-- LANGUAGE sql function whose body is more volatile than its declaration
-- is run as a separate query, parsed and planned on every call.)
CREATE OR REPLACE FUNCTION @S@._us(t timestamptz) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT (extract(epoch FROM t) * 1000000)::bigint $$;

CREATE OR REPLACE FUNCTION @S@._ms(n bigint) RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT n * interval '1 millisecond' $$;

-- Advisory lock key of a name: a 64-bit hash (a collision only serializes
-- two names), or one key for everything when the session sets
-- baton.serialize = 'global' (one scheduler lock for all names).
CREATE OR REPLACE FUNCTION @S@._key(p_name text) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN current_setting('baton.serialize', true) = 'global'
              THEN hashtextextended('@S@', 1)
              ELSE hashtextextended(p_name, 7) END
$$;

-- Serializes the scheduling step: transaction-scoped advisory locks on
-- every name, taken in key order (no deadlock between two callers).
CREATE OR REPLACE FUNCTION @S@._lock(p_names text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE k bigint;
BEGIN
  FOR k IN SELECT DISTINCT @S@._key(x) FROM unnest(p_names) x ORDER BY 1 LOOP
    PERFORM pg_advisory_xact_lock(k);
  END LOOP;
END $$;

-- Versions 6 and 7: the condition of the one-statement fast paths that
-- builds of those versions send (an UPDATE of the name's locks row), kept
-- for such a process that still runs beside this version (it refuses the
-- schema only when it opens it again). Takes the name's advisory lock,
-- sets the commit's durability
-- (on to grant, off to release) and answers whether the name has no
-- queued request (and, to grant, no holders row), read after the lock:
-- each query of a VOLATILE PL/pgSQL function takes a new snapshot, so it
-- sees what the pass it waited for committed. Called last in the UPDATE's
-- condition (its cost); if the row changed meanwhile, the UPDATE checks
-- its newest version again, this call included.
CREATE OR REPLACE FUNCTION @S@._claim(p_name text, p_grant boolean)
RETURNS boolean LANGUAGE plpgsql VOLATILE COST 10000 AS $$
DECLARE v_void text;
BEGIN
  v_void := pg_advisory_xact_lock(@S@._key(p_name))::text;
  v_void := set_config('synchronous_commit',
                       CASE WHEN p_grant THEN 'on' ELSE 'off' END, true);
  RETURN NOT EXISTS (SELECT 1 FROM @S@.requests WHERE name = p_name)
     AND (NOT p_grant
          OR NOT EXISTS (SELECT 1 FROM @S@.holders WHERE name = p_name));
END $$;

CREATE OR REPLACE FUNCTION @S@._hex(t uuid) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT replace(t::text, '-', '') $$;

CREATE OR REPLACE FUNCTION @S@._err(p_code text, p_msg text) RETURNS @S@.res
LANGUAGE sql VOLATILE AS $$
  SELECT ROW('error', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
             @S@._us(clock_timestamp()), NULL, NULL, NULL, p_code,
             p_msg)::@S@.res
$$;

CREATE OR REPLACE FUNCTION @S@._quote(p_name text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT '"' || CASE WHEN octet_length(p_name) > 64
                     THEN left(p_name, 64) || '...' ELSE p_name END || '"'
$$;

-- (STABLE like text || int, so it is inlined; see _us.)
CREATE OR REPLACE FUNCTION @S@._check_name(p_name text, p_what text)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_name IS NULL OR p_name = '' THEN p_what || ' is empty'
    WHEN octet_length(p_name) > 512 THEN p_what || ' is ' ||
         octet_length(p_name) || ' bytes; the limit is 512'
  END
$$;

CREATE OR REPLACE FUNCTION @S@._check_ttl(p_ttl_ms bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_ttl_ms IS NULL OR p_ttl_ms < 1 OR p_ttl_ms > 604800000
    THEN 'TTL ' || coalesce(p_ttl_ms::text, 'NULL') ||
         'ms is out of range (1ms .. 7d)' END
$$;

CREATE OR REPLACE FUNCTION @S@._grant_row(h @S@.holders, p_capacity int,
                                           p_now timestamptz)
RETURNS @S@.res LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN ROW('grant', h.name, h.token, h.fencing, h.ttl_ms, h.holds,
             p_capacity, @S@._us(h.expires_at), @S@._us(p_now), h.label,
             NULL, h.shared, NULL, NULL)::@S@.res;
END $$;

-- Removes an acquire_all reservation's queued requests on every name.
CREATE OR REPLACE FUNCTION @S@._drop_group(p_token uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM @S@.requests WHERE token = p_token AND kind = 2;
  PERFORM pg_notify('@S@_wake', @S@._hex(p_token));
END $$;

-- Removes what is due on a name at p_now: expired leases, requests whose
-- deadline passed, dead waiters (heartbeat too old).
CREATE OR REPLACE FUNCTION @S@._expire(p_name text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE t uuid;
BEGIN
  PERFORM @S@._spill(p_name, p_now);
  DELETE FROM @S@.holders WHERE name = p_name AND expires_at <= p_now;
  DELETE FROM @S@.withdrawn WHERE name = p_name AND until <= p_now;
  DELETE FROM @S@.requests WHERE name = p_name AND kind <> 2
     AND (deadline <= p_now OR heartbeat_until <= p_now);
  FOR t IN SELECT token FROM @S@.requests WHERE name = p_name AND kind = 2
              AND (deadline <= p_now OR heartbeat_until <= p_now) LOOP
    PERFORM @S@._drop_group(t);
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION @S@._check_capacity(p_capacity int)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_capacity IS NULL OR p_capacity < 1
    THEN 'capacity ' || coalesce(p_capacity::text, 'NULL') ||
         ' is invalid; it must be at least 1' END
$$;

-- A grant must survive a crash (its fencing token is never handed out
-- twice): its transaction commits durably even where the server's default
-- is synchronous_commit = off.
-- (Helpers on the hot path are PL/pgSQL, whose plans are cached per
-- session; a LANGUAGE sql function that is not inlined is planned anew on
-- every call.)
CREATE OR REPLACE FUNCTION @S@._durable() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF current_setting('synchronous_commit') = 'off' THEN
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;
END $$;

-- Creates a lease on a name that has room for it: creates the lock row or
-- (re)sets its capacity (the caller checked it may: the lock is idle or
-- has this capacity already) and takes the next fencing token, in one
-- upsert.
CREATE OR REPLACE FUNCTION @S@._grant_new(p_name text, p_token uuid,
    p_ttl_ms bigint, p_capacity int, p_label text, p_rkey text,
    p_now timestamptz, p_shared boolean DEFAULT false)
RETURNS @S@.holders LANGUAGE plpgsql AS $$
DECLARE f bigint; h @S@.holders;
BEGIN
  PERFORM @S@._durable();
  INSERT INTO @S@.locks AS l (name, capacity, last_fencing)
  VALUES (p_name, p_capacity, 1)
  ON CONFLICT (name) DO UPDATE SET capacity = EXCLUDED.capacity,
                                   last_fencing = l.last_fencing + 1
  RETURNING l.last_fencing INTO f;
  INSERT INTO @S@.holders (name, token, fencing, ttl_ms, expires_at, holds,
                           label, reentrancy_key, aliases, granted_at, shared)
  VALUES (p_name, p_token, f, p_ttl_ms, p_now + p_ttl_ms * interval '1 ms',
          1, p_label, p_rkey, '{}', p_now, p_shared)
  RETURNING * INTO h;
  RETURN h;
END $$;

-- A reentrant join: one more hold on the lease with this reentrancy key,
-- its expiry pushed to now + ttl if later; NULL if there is none.
CREATE OR REPLACE FUNCTION @S@._join(p_name text, p_rkey text, p_token uuid,
    p_ttl_ms bigint, p_now timestamptz)
RETURNS @S@.holders LANGUAGE sql AS $$
  SELECT @S@._durable();
  UPDATE @S@.holders x SET
      holds = x.holds + 1,
      ttl_ms = CASE WHEN p_now + @S@._ms(p_ttl_ms) > x.expires_at
                    THEN p_ttl_ms ELSE x.ttl_ms END,
      expires_at = greatest(x.expires_at, p_now + @S@._ms(p_ttl_ms)),
      aliases = CASE WHEN x.token = p_token THEN x.aliases
                     ELSE x.aliases || p_token END
    WHERE x.name = p_name AND x.reentrancy_key = p_rkey
      AND x.holds < 2147483647
  RETURNING x.*
$$;

-- Queues a request.
CREATE OR REPLACE FUNCTION @S@._enqueue(p_name text, p_token uuid,
    p_seq bigint, p_kind int, p_ttl_ms bigint, p_label text,
    p_rkey text, p_now timestamptz, p_deadline timestamptz,
    p_heartbeat timestamptz, p_shared boolean DEFAULT false)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO @S@.requests (name, token, seq, kind, ttl_ms, label,
                            reentrancy_key, arrived_at, deadline,
                            heartbeat_until, shared)
  VALUES (p_name, p_token, p_seq, p_kind, p_ttl_ms, p_label, p_rkey, p_now,
          p_deadline, p_heartbeat, p_shared)
$$;

-- Creates a lease: takes the name's next fencing token.
CREATE OR REPLACE FUNCTION @S@._grant(p_name text, p_token uuid,
    p_ttl_ms bigint, p_label text, p_rkey text, p_now timestamptz,
    p_shared boolean DEFAULT false)
RETURNS @S@.holders LANGUAGE plpgsql AS $$
DECLARE f bigint; h @S@.holders;
BEGIN
  PERFORM @S@._durable();
  UPDATE @S@.locks SET last_fencing = last_fencing + 1 WHERE name = p_name
    RETURNING last_fencing INTO f;
  INSERT INTO @S@.holders (name, token, fencing, ttl_ms, expires_at, holds,
                           label, reentrancy_key, aliases, granted_at, shared)
  VALUES (p_name, p_token, f, p_ttl_ms, p_now + @S@._ms(p_ttl_ms), 1,
          p_label, p_rkey, '{}', p_now, p_shared)
  RETURNING * INTO h;
  RETURN h;
END $$;

-- A lock is active while it has holders or queued requests; its capacity
-- is fixed only then.
CREATE OR REPLACE FUNCTION @S@._active(p_name text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM @S@.holders WHERE name = p_name)
      OR EXISTS (SELECT 1 FROM @S@.requests WHERE name = p_name)
$$;

-- Makes sure the lock row exists; sets the capacity if the lock is idle.
CREATE OR REPLACE FUNCTION @S@._touch(p_name text, p_capacity int)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF @S@._active(p_name) THEN RETURN; END IF;
  INSERT INTO @S@.locks (name, capacity) VALUES (p_name, p_capacity)
  ON CONFLICT (name) DO UPDATE SET capacity = EXCLUDED.capacity;
END $$;

-- The error message if a request's capacity differs from the capacity of
-- an active lock (NULL if it fits).
CREATE OR REPLACE FUNCTION @S@._capacity_conflict(p_name text,
                                                  p_capacity int)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT 'lock ' || @S@._quote(p_name) || ' has capacity ' || l.capacity ||
         '; request asked for ' || p_capacity
    FROM @S@.locks l
   WHERE l.name = p_name AND l.capacity <> p_capacity AND @S@._active(p_name)
$$;

-- Free for a new request right now: no queue, and the holders leave room
-- for it (rule 18: a shared request fits beside shared holders only, an
-- exclusive one needs capacity left and no shared holder).
CREATE OR REPLACE FUNCTION @S@._free(p_name text,
                                     p_shared boolean DEFAULT false)
RETURNS boolean LANGUAGE sql STABLE AS $$
  SELECT NOT EXISTS (SELECT 1 FROM @S@.requests WHERE name = p_name)
     AND CASE WHEN p_shared THEN
           NOT EXISTS (SELECT 1 FROM @S@.holders
                        WHERE name = p_name AND NOT shared)
         ELSE
           (SELECT count(*) FROM @S@.holders WHERE name = p_name) <
             coalesce((SELECT capacity FROM @S@.locks WHERE name = p_name), 1)
           AND NOT EXISTS (SELECT 1 FROM @S@.holders
                            WHERE name = p_name AND shared)
         END
$$;

CREATE OR REPLACE FUNCTION @S@._holder_rows(p_name text, p_now timestamptz)
RETURNS SETOF @S@.res LANGUAGE sql STABLE AS $$
  SELECT ROW('holder', h.name, NULL, h.fencing, h.ttl_ms, h.holds, NULL,
             @S@._us(h.expires_at), @S@._us(p_now), h.label,
             greatest(0, floor(extract(epoch FROM h.expires_at - p_now)
                               * 1000))::bigint,
             h.shared, NULL, NULL)::@S@.res
  FROM @S@.holders_all h WHERE h.name = p_name AND h.expires_at > p_now
  ORDER BY h.fencing
$$;
)SQL";

}  // namespace baton::store::pg
