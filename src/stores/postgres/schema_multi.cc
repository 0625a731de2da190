// stores/postgres/schema_multi.cc — acquire_multi (reservations over several
// names), describe / list, counters and the fenced-write helper of the
// postgres:// store (PL/pgSQL in a raw string; "@S@" is the schema).
#include "stores/postgres/schema.h"

namespace baton::store::pg {

const char* const kSchemaMulti = R"SQL(
-- acquire_multi: one request per name under one reservation (p_token).
-- acquire_some (p_all = false): grants what is free now, queues the rest
-- until now + ttl (each call refreshes), returns every lease the
-- reservation holds among the names plus a 'status' row (n = pending).
-- acquire_all (p_all = true): all names at once or none; p_mode as for
-- acquire ('try', 'wait' with p_wait_ms/p_hb_ms, 'withdraw').
CREATE OR REPLACE FUNCTION @S@.acquire_multi(p_names text[], p_token uuid,
    p_ttl_ms bigint, p_capacity int, p_label text, p_all boolean,
    p_mode text, p_wait_ms bigint, p_hb_ms bigint)
RETURNS SETOF @S@.res LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz;
  v_msg text;
  v_kind smallint := CASE WHEN p_all THEN 2 ELSE 1 END;
  v_seq bigint;
  v_pending bigint := 0;
  v_blocked text;
  x text;
  h @S@.holders;
  r @S@.res;
  v_recheck boolean := p_mode = 'recheck';
BEGIN
  IF v_recheck THEN
    p_mode := 'wait';
  END IF;
  IF p_names IS NULL OR cardinality(p_names) = 0 THEN
    v_msg := 'no lock names given';
  ELSIF cardinality(p_names) > 1024 THEN
    v_msg := cardinality(p_names) || ' lock names given; the limit is 1024';
  ELSIF (SELECT count(DISTINCT y) FROM unnest(p_names) y) <>
        cardinality(p_names) THEN
    v_msg := 'lock names contain duplicates';
  ELSE
    SELECT @S@._check_name(y, 'lock name') INTO v_msg FROM unnest(p_names) y
     WHERE @S@._check_name(y, 'lock name') IS NOT NULL LIMIT 1;
  END IF;
  v_msg := coalesce(v_msg, @S@._check_ttl(p_ttl_ms),
                    @S@._check_capacity(p_capacity));
  IF v_msg IS NOT NULL THEN
    RETURN NEXT @S@._err('invalid_argument', v_msg);
    RETURN;
  END IF;
  v_now := @S@._begin(p_names);
  -- Decide before changing anything.
  SELECT @S@._capacity_conflict(y, p_capacity) INTO v_msg
    FROM unnest(p_names) y
   WHERE @S@._capacity_conflict(y, p_capacity) IS NOT NULL LIMIT 1;
  IF v_msg IS NOT NULL THEN
    RETURN NEXT @S@._err('invalid_argument', v_msg);
    RETURN;
  END IF;
  SELECT name INTO x FROM @S@.requests
   WHERE token = p_token AND name = ANY (p_names) AND kind <> v_kind LIMIT 1;
  IF FOUND THEN
    RETURN NEXT @S@._err('invalid_argument', 'reservation is already queued '
        'on lock ' || @S@._quote(x) || ' by ' ||
        CASE WHEN p_all THEN 'acquire_some' ELSE 'acquire_all' END);
    RETURN;
  END IF;

  IF p_all AND v_recheck
     AND NOT EXISTS (SELECT 1 FROM @S@.requests WHERE token = p_token)
     AND EXISTS (SELECT 1 FROM @S@.withdrawn
                  WHERE token = p_token AND name = ANY (p_names)) THEN
    DELETE FROM @S@.withdrawn WHERE token = p_token AND name = ANY (p_names);
    RETURN NEXT @S@._err('not_acquired',
                         'the reservation was withdrawn while it waited');
    RETURN;
  END IF;
  IF p_all THEN
    IF EXISTS (SELECT 1 FROM @S@.requests WHERE token = p_token
                 AND name = ANY (p_names)) THEN
      -- A retry of a queued reservation: refresh it, keep its places.
      IF p_mode = 'withdraw' OR p_wait_ms <= 0 THEN
        PERFORM @S@._drop_group(p_token);
        FOREACH x IN ARRAY p_names LOOP
          PERFORM @S@._pump(x, v_now);
        END LOOP;
        RETURN NEXT @S@._err('timeout',
                             'wait deadline of the reservation passed');
        RETURN;
      END IF;
      IF p_mode = 'wait' THEN
        UPDATE @S@.requests SET deadline = v_now + @S@._ms(p_wait_ms),
               heartbeat_until = v_now + @S@._ms(p_hb_ms)
         WHERE token = p_token AND kind = 2;
      END IF;
      SELECT count(*) INTO v_pending FROM @S@.requests
       WHERE token = p_token AND kind = 2;
    ELSE
      SELECT y INTO v_blocked FROM unnest(p_names) WITH ORDINALITY AS u(y, i)
       WHERE NOT EXISTS (SELECT 1 FROM @S@.holders
                          WHERE name = y AND token = p_token)
         AND NOT @S@._free(y)
       ORDER BY i LIMIT 1;
      IF v_blocked IS NULL THEN
        FOREACH x IN ARRAY p_names LOOP
          IF NOT EXISTS (SELECT 1 FROM @S@.holders
                          WHERE name = x AND token = p_token) THEN
            PERFORM @S@._grant_new(x, p_token, p_ttl_ms, p_capacity, p_label,
                                   '', v_now);
          END IF;
        END LOOP;
      ELSIF p_mode = 'try' THEN
        RETURN NEXT @S@._err('not_acquired', 'lock ' || @S@._quote(v_blocked)
            || ' is not free (' ||
            (SELECT count(*) FROM @S@.holders WHERE name = v_blocked) ||
            ' of ' || (SELECT capacity FROM @S@.locks WHERE name = v_blocked)
            || ' held, ' ||
            (SELECT count(*) FROM @S@.requests WHERE name = v_blocked) ||
            ' waiting)');
        RETURN QUERY SELECT * FROM @S@._holder_rows(v_blocked, v_now);
        RETURN;
      ELSIF p_mode = 'withdraw' OR p_wait_ms <= 0 THEN
        RETURN NEXT @S@._err('timeout',
                             'wait deadline passed before the locks were free');
        RETURN;
      ELSIF EXISTS (SELECT 1 FROM @S@.requests
                     WHERE token = p_token AND kind = 2) THEN
        RETURN NEXT @S@._err('invalid_argument',
                             'reservation is already queued on other locks');
        RETURN;
      ELSE
        -- One arrival for every name: one sequence value, all queues
        -- locked, so the order is the same in every queue (no deadlock).
        v_seq := nextval('@S@.request_seq');
        FOREACH x IN ARRAY p_names LOOP
          IF NOT EXISTS (SELECT 1 FROM @S@.holders
                          WHERE name = x AND token = p_token) THEN
            PERFORM @S@._touch(x, p_capacity);
            PERFORM @S@._enqueue(x, p_token, v_seq, 2, p_ttl_ms, p_label, '',
                                 v_now, v_now + @S@._ms(p_wait_ms),
                                 v_now + @S@._ms(p_hb_ms));
            v_pending := v_pending + 1;
          END IF;
        END LOOP;
      END IF;
    END IF;
  ELSE
    -- acquire_some: every name on its own.
    FOREACH x IN ARRAY p_names LOOP
      IF EXISTS (SELECT 1 FROM @S@.holders
                  WHERE name = x AND token = p_token) THEN
        CONTINUE;
      ELSIF EXISTS (SELECT 1 FROM @S@.requests
                     WHERE name = x AND token = p_token) THEN
        UPDATE @S@.requests SET deadline = v_now + @S@._ms(p_ttl_ms)
         WHERE name = x AND token = p_token;
        v_pending := v_pending + 1;
      ELSIF @S@._free(x) THEN
        PERFORM @S@._grant_new(x, p_token, p_ttl_ms, p_capacity, p_label, '',
                               v_now);
      ELSIF p_mode <> 'try' THEN
        PERFORM @S@._enqueue(x, p_token, nextval('@S@.request_seq'), 1,
                             p_ttl_ms, p_label, '', v_now,
                             v_now + @S@._ms(p_ttl_ms), NULL);
        v_pending := v_pending + 1;
      END IF;
    END LOOP;
  END IF;
  FOR h IN SELECT hh.* FROM unnest(p_names) WITH ORDINALITY AS u(y, i)
             JOIN @S@.holders hh ON hh.name = u.y AND hh.token = p_token
            ORDER BY u.i LOOP
    RETURN NEXT @S@._grant_row(h,
        (SELECT capacity FROM @S@.locks WHERE name = h.name), v_now);
  END LOOP;
  r := ROW('status', NULL, p_token, NULL, NULL, NULL, NULL, NULL,
           @S@._us(v_now), NULL, v_pending, NULL, NULL, NULL);
  RETURN NEXT r;
END $$;

-- describe: holders (grant order) and live waiters (queue order) of one
-- name, read without locking; a free, unknown lock has capacity 1.
CREATE OR REPLACE FUNCTION @S@.describe(p_name text)
RETURNS SETOF @S@.res LANGUAGE plpgsql AS $$
DECLARE v_now timestamptz := clock_timestamp(); v_msg text; r @S@.res;
        v_live boolean;
BEGIN
  v_msg := @S@._check_name(p_name, 'lock name');
  IF v_msg IS NOT NULL THEN
    RETURN NEXT @S@._err('invalid_argument', v_msg);
    RETURN;
  END IF;
  v_live := EXISTS (SELECT 1 FROM @S@.holders_all
                     WHERE name = p_name AND expires_at > v_now)
         OR EXISTS (SELECT 1 FROM @S@.requests WHERE name = p_name
                      AND deadline > v_now
                      AND coalesce(heartbeat_until > v_now, true));
  r := ROW('lock', p_name, NULL,
           coalesce((SELECT last_fencing FROM @S@.locks WHERE name = p_name),
                    0), NULL, NULL,
           CASE WHEN v_live THEN (SELECT capacity FROM @S@.locks
                                   WHERE name = p_name) ELSE 1 END,
           NULL, @S@._us(v_now), NULL, NULL, NULL, NULL, NULL);
  RETURN NEXT r;
  RETURN QUERY SELECT * FROM @S@._holder_rows(p_name, v_now);
  RETURN QUERY
    SELECT (ROW('waiter', q.name, NULL, NULL, q.ttl_ms, NULL, NULL, NULL,
                @S@._us(v_now), q.label,
                greatest(0, floor(extract(epoch FROM v_now - q.arrived_at)
                                  * 1000))::bigint,
                q.kind = 2, CASE WHEN q.shared THEN 'shared' END,
                NULL)::@S@.res).*
      FROM @S@.requests q
     WHERE q.name = p_name AND q.deadline > v_now
       AND coalesce(q.heartbeat_until > v_now, true)
     ORDER BY q.seq;
END $$;

-- list: locks with live holders or waiters whose name starts with p_prefix,
-- by name, at most p_limit; each described as by describe().
CREATE OR REPLACE FUNCTION @S@.list(p_prefix text, p_limit int)
RETURNS SETOF @S@.res LANGUAGE plpgsql AS $$
DECLARE v_now timestamptz := clock_timestamp(); x text;
BEGIN
  FOR x IN
    SELECT y FROM (
      SELECT name AS y FROM @S@.holders_all
       WHERE starts_with(name, p_prefix) AND expires_at > v_now
      UNION
      SELECT name FROM @S@.requests
       WHERE starts_with(name, p_prefix) AND deadline > v_now
         AND coalesce(heartbeat_until > v_now, true)) s
    ORDER BY y COLLATE "C" LIMIT p_limit
  LOOP
    RETURN QUERY SELECT * FROM @S@.describe(x);
  END LOOP;
END $$;

-- Counters: get, add, guarded take. One statement each.
CREATE OR REPLACE FUNCTION @S@.counter(p_op text, p_name text, p_n bigint)
RETURNS SETOF @S@.res LANGUAGE plpgsql AS $$
DECLARE v_msg text; v bigint; r @S@.res;
BEGIN
  v_msg := @S@._check_name(p_name, 'counter name');
  IF v_msg IS NOT NULL THEN
    RETURN NEXT @S@._err('invalid_argument', v_msg);
    RETURN;
  END IF;
  IF p_op = 'get' THEN
    v := coalesce((SELECT value FROM @S@.counters WHERE name = p_name), 0);
  ELSIF p_op = 'add' THEN
    BEGIN
      INSERT INTO @S@.counters AS c (name, value) VALUES (p_name, p_n)
      ON CONFLICT (name) DO UPDATE SET value = c.value + EXCLUDED.value
      RETURNING value INTO v;
    EXCEPTION WHEN numeric_value_out_of_range THEN
      RETURN NEXT @S@._err('invalid_argument', 'counter ' ||
          @S@._quote(p_name) || ' is ' ||
          (SELECT value FROM @S@.counters WHERE name = p_name) ||
          '; adding ' || p_n || ' would overflow');
      RETURN;
    END;
  ELSIF p_op = 'take' THEN
    IF p_n IS NULL OR p_n < 1 THEN
      RETURN NEXT @S@._err('invalid_argument', 'counter take of ' ||
          coalesce(p_n::text, 'NULL') || ' is invalid; it must be at least 1');
      RETURN;
    END IF;
    UPDATE @S@.counters SET value = value - p_n
     WHERE name = p_name AND value >= p_n RETURNING value INTO v;
    IF NOT FOUND THEN
      RETURN NEXT @S@._err('not_acquired', 'counter ' || @S@._quote(p_name)
          || ' is ' ||
          coalesce((SELECT value FROM @S@.counters WHERE name = p_name), 0)
          || '; cannot take ' || p_n);
      RETURN;
    END IF;
  ELSE
    RETURN NEXT @S@._err('invalid_argument', 'unknown counter operation');
    RETURN;
  END IF;
  r := ROW('status', p_name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           v, NULL, NULL, NULL);
  RETURN NEXT r;
END $$;

-- The protected resource's check: accepts (true) iff p_token is
-- at least the highest token seen for p_resource, and records it. Call it
-- in the same transaction as the write it guards.
CREATE OR REPLACE FUNCTION @S@.fenced_write(resource text, token bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE ok boolean;
BEGIN
  INSERT INTO @S@.fences AS f (resource, highest) VALUES ($1, $2)
  ON CONFLICT ON CONSTRAINT fences_pkey DO UPDATE SET highest = EXCLUDED.highest
   WHERE f.highest <= EXCLUDED.highest
  RETURNING true INTO ok;
  RETURN coalesce(ok, false);
END $$;
)SQL";

}  // namespace baton::store::pg
