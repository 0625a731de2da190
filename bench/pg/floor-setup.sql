-- bench/pg/floor-setup.sql — the durable floor of any table-backed lock
-- with the postgres:// store's durability (bench/run_postgres.sh,
-- bench/pg_ab.sh): one single-row write committed durably per acquire, one
-- committed without waiting for the flush per release (as the store's
-- uncontended release).
CREATE TABLE IF NOT EXISTS bench_floor (k int PRIMARY KEY, v bigint NOT NULL);
CREATE OR REPLACE FUNCTION bench_floor_release(p_k int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  UPDATE bench_floor SET v = v + 1 WHERE k = p_k;
END $$;
