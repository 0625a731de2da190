// bench/peers/node/common.js — the harness shared by the npm peers: the same
// closed-loop workloads and JSON shape as `baton bench` (see
// ../peercommon.py). N clients are N async loops in one process, each with
// its own connection. Bounded: every wait is cut to the run's deadline.
'use strict';

function parseArgs(argv) {
  const a = { workload: 'uncontended', clients: 1, locks: 1, duration: '5s' };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, '');
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${argv[i]} needs a value`);
    a[k] = ['clients', 'locks'].includes(k) ? parseInt(v, 10) : v;
  }
  if (!a.url) throw new Error('--url is required');
  if (!['uncontended', 'contended'].includes(a.workload)) {
    throw new Error(`--workload must be uncontended or contended, not ${a.workload}`);
  }
  if (!(a.clients >= 1 && a.locks >= 1)) throw new Error('--clients and --locks must be >= 1');
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(a.duration);
  if (!m) throw new Error(`bad --duration ${a.duration}`);
  a.seconds = parseFloat(m[1]) * (m[2] === 'ms' ? 0.001 : m[2] === 'm' ? 60 : 1);
  return a;
}

function summarize(s) {
  if (s.length === 0) return { count: 0, mean_us: 0, p50_us: 0, p90_us: 0, p99_us: 0, max_us: 0 };
  s.sort((x, y) => x - y);
  const n = s.length;
  const pct = (p) => s[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))] / 1000;
  const r1 = (v) => Math.round(v * 10) / 10;
  return {
    count: n, mean_us: r1(s.reduce((x, y) => x + y, 0) / n / 1000), p50_us: r1(pct(0.5)),
    p90_us: r1(pct(0.9)), p99_us: r1(pct(0.99)), max_us: r1(s[n - 1] / 1000),
  };
}

const nowNs = () => Number(process.hrtime.bigint());

// newSession(i) -> Promise<{tryAcquire(name), acquire(name, timeoutMs),
// release(), close()}>; tryAcquire/acquire resolve to true/false.
async function run(peer, store, newSession) {
  const a = parseArgs(process.argv);
  const prefix = `bench-${Date.now() % 1e9}`;
  const sessions = [];
  for (let i = 0; i < a.clients; i++) sessions.push(await newSession(i, a));
  const k = a.workload === 'contended' ? a.locks : 1;
  const lastRelease = new Array(k).fill(0);
  const start = nowNs();
  const deadline = start + a.seconds * 1e9;
  const stats = sessions.map(() => ({ acq: [], hand: [], pairs: 0, errors: 0, first: '', worst: 0 }));
  const fail = (st, e) => { st.errors++; if (!st.first) st.first = String(e && e.message ? e.message : e); };
  await Promise.all(sessions.map(async (s, i) => {
    const st = stats[i];
    const lock = i % k;
    const name = a.workload === 'uncontended' ? `${prefix}/u/${i}` : `${prefix}/c/${lock}`;
    while (nowNs() < deadline) {
      const t0 = nowNs();
      let got;
      try {
        if (a.workload === 'uncontended') {
          got = await s.tryAcquire(name);
        } else {
          const left = (deadline - nowNs()) / 1e6;
          if (left <= 0) break;
          got = await s.acquire(name, left);
        }
      } catch (e) { fail(st, e); continue; }
      const t1 = nowNs();
      st.worst = Math.max(st.worst, t1 - t0);
      if (!got) {
        if (a.workload === 'contended') { if (nowNs() + 50e6 >= deadline) break; continue; }
        fail(st, 'own lock busy');
        continue;
      }
      st.acq.push(t1 - t0);
      if (a.workload === 'contended') {
        const rel = lastRelease[lock];
        if (t0 < rel && rel <= t1) st.hand.push(t1 - rel);
        lastRelease[lock] = nowNs();
      }
      try { await s.release(); } catch (e) { fail(st, e); continue; }
      st.pairs++;
    }
  }));
  const secs = (nowNs() - start) / 1e9;
  for (const s of sessions) { try { await s.close(); } catch (e) { /* closing */ } }
  const per = stats.map((st) => st.pairs);
  const pairs = per.reduce((x, y) => x + y, 0);
  const sq = per.reduce((x, y) => x + y * y, 0);
  const out = {
    peer, store, workload: a.workload, clients: a.clients, locks: k,
    seconds: Math.round(secs * 10) / 10, pairs, pairs_per_sec: Math.round(pairs / secs * 10) / 10,
    acquire: summarize(stats.flatMap((st) => st.acq)), handoff: summarize(stats.flatMap((st) => st.hand)),
    errors: stats.reduce((x, st) => x + st.errors, 0), first_error: (stats.find((st) => st.first) || { first: '' }).first,
    busy: 0, jain: sq ? Math.round(pairs * pairs / (per.length * sq) * 1000) / 1000 : 0,
    min_client_pairs: Math.min(...per), max_client_pairs: Math.max(...per),
    worst_wait_ms: Math.round(Math.max(...stats.map((st) => st.worst)) / 1e3) / 1e3, completed: true,
  };
  process.stdout.write(JSON.stringify(out) + '\n');
}

function version(pkg) { return require(`${pkg}/package.json`).version; }

module.exports = { run, version };
