#!/usr/bin/env bash
# tests/postgres/rolling_upgrade.sh — two builds of baton on one postgres://
# schema at the same time, the way a fleet is upgraded one host at a time:
#
#   tests/postgres/rolling_upgrade.sh OLD_BATON NEW_BATON
#
# (each the `baton` CLI of a build). On a private PostgreSQL 15 (loopback,
# a temp dir, stopped at the end):
#   1. OLD opens the schema first (it creates it at OLD's version);
#   2. OLD runs `baton bench` (8 clients waiting on one lock, and 2
#      clients on locks of their own, through OLD's fast statements);
#   3. while it runs, NEW opens the same schema (migrating it to NEW's
#      version, if newer) and runs the same workloads on the same lock
#      names, so both builds share the lock's queue;
#   4. once NEW has opened it, a newly started OLD process must be refused
#      with an error naming both versions (or work, if the version did not
#      change).
# A trigger installed for the test aborts any transaction that leaves a
# lock with more live holders than it may have, so an exclusion violation
# by either build shows up as errors in its bench. Passes if neither bench
# had an error and each made progress. Takes about 40 s; not part of
# scripts/test.
set -euo pipefail
OLD=${1:?usage: rolling_upgrade.sh OLD_BATON NEW_BATON}
NEW=${2:?usage: rolling_upgrade.sh OLD_BATON NEW_BATON}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-pgup.XXXXXX")
AS=()
if [[ $(id -u) == 0 ]]; then chown postgres "$WORK"; AS=(runuser -u postgres --); fi
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${AS[@]}" "$PGBIN/initdb" -D "$WORK/data" -A trust -U postgres -E UTF8 --locale=C >"$WORK/initdb.log"
"${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w -t 60 \
  -o "-p $PORT -k $WORK -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
PG_PID=$(head -1 "$WORK/data/postmaster.pid")
trap 'kill -INT $PG_PID 2>/dev/null; sleep 1; rm -rf "$WORK"' EXIT
psql() { "$PGBIN/psql" -qAtX -h 127.0.0.1 -p "$PORT" -U postgres "$@" postgres; }
URL="postgres://postgres@127.0.0.1:$PORT/postgres?schema=ru"
fail() { echo "FAIL: $*"; exit 1; }

"$OLD" --store "$URL" status >/dev/null || fail "OLD could not open the store"
OLD_VERSION=$(psql -c "SELECT max(version) FROM ru.schema_version")
echo "OLD made schema version $OLD_VERSION"

# The exclusion check: after every change of a lease, the lock has at most
# `capacity` live holders and no exclusive one beside another.
psql <<'SQL'
CREATE FUNCTION ru._check_exclusion() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE v_n int; v_excl int; v_cap int;
BEGIN
  SELECT count(*), count(*) FILTER (WHERE NOT shared) INTO v_n, v_excl
    FROM ru.holders_all WHERE name = NEW.name AND expires_at > clock_timestamp();
  SELECT capacity INTO v_cap FROM ru.locks WHERE name = NEW.name;
  IF v_n > coalesce(v_cap, 1) OR (v_excl > 0 AND v_n > v_excl)
     OR (v_excl > 1 AND v_excl > coalesce(v_cap, 1)) THEN
    RAISE EXCEPTION 'exclusion violated on %: % holders', NEW.name, v_n;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER check_locks AFTER UPDATE ON ru.locks FOR EACH ROW
  WHEN (NEW.h_token IS NOT NULL) EXECUTE FUNCTION ru._check_exclusion();
CREATE TRIGGER check_holders AFTER INSERT OR UPDATE ON ru.holders FOR EACH ROW
  EXECUTE FUNCTION ru._check_exclusion();
SQL

bench() {  # BIN WORKLOAD CLIENTS PREFIX SECONDS OUT
  "$1" bench --store "$URL" --workload "$2" --clients "$3" --locks 1 \
    --prefix "$4" --duration "$5s" --json >"$6" 2>"$6.err" || true
}
bench "$OLD" contended 8 up/shared 25 "$WORK/old-c.json" &
bench "$OLD" uncontended 2 up/old 25 "$WORK/old-u.json" &
sleep 5
bench "$NEW" contended 8 up/shared 12 "$WORK/new-c.json" &
bench "$NEW" uncontended 2 up/new 12 "$WORK/new-u.json" &
sleep 4
NEW_VERSION=$(psql -c "SELECT max(version) FROM ru.schema_version")
echo "NEW made schema version $NEW_VERSION"
if "$OLD" --store "$URL" status >"$WORK/late.out" 2>&1; then
  [[ $NEW_VERSION == "$OLD_VERSION" ]] || fail "a new OLD process opened schema version $NEW_VERSION"
  echo "a new OLD process still opens the schema (same version)"
else
  echo "a new OLD process is refused: $(tail -1 "$WORK/late.out")"
  grep -q "version $NEW_VERSION" "$WORK/late.out" && grep -q "up to $OLD_VERSION" "$WORK/late.out" ||
    fail "the refusal does not name both versions"
fi
wait
status=0
for run in old-c old-u new-c new-u; do
  line=$(/usr/bin/python3 -c '
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print("0 -1 no result:", open(sys.argv[1] + ".err").read().strip()[-300:]); sys.exit()
print(round(r["pairs_per_sec"]), r["errors"], r.get("first_error", ""))' "$WORK/$run.json")
  read -r pairs errors rest <<<"$line"
  echo "$run: $pairs pairs/s, errors $errors ${rest:+($rest)}"
  if [[ $errors != 0 || $pairs == 0 ]]; then status=1; fi
done
[[ $status == 0 ]] && echo "PASS: both builds shared the schema, the lock and its queue with no exclusion error"
exit $status
