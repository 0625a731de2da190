-- bench/pg/floor.sql — one pair of the floor (pgbench script; see floor-setup.sql).
INSERT INTO bench_floor AS f VALUES (:client_id, 1) ON CONFLICT (k) DO UPDATE SET v = f.v + 1;
SELECT bench_floor_release(:client_id);
