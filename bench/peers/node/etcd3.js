// npm etcd3 Lock. The library has no blocking acquire (acquire() fails
// with EtcdLockFailedError when held), so contended retries every 10 ms in
// this harness, as a user would.
'use strict';
const { Etcd3, EtcdLockFailedError } = require('etcd3');
const { run, version } = require('./common');

run(`etcd3 ${version('etcd3')} Lock`, 'etcd', async (i, a) => {
  const client = new Etcd3({ hosts: `http://${a.url}` });
  let lock = null;
  const tryOnce = async (name) => {
    lock = client.lock(name).ttl(30);
    try { await lock.acquire(); return true; } catch (e) {
      if (e instanceof EtcdLockFailedError) return false; throw e;
    }
  };
  return {
    tryAcquire: tryOnce,
    async acquire(name, timeoutMs) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        if (await tryOnce(name)) return true;
        if (Date.now() + 10 >= end) return false;
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    async release() { await lock.release(); lock = null; },
    async close() { client.close(); },
  };
}).then(() => {
  // The client's timers (lease keep-alives) kept the process alive ~30 s
  // after the figures were printed (stdout to a pipe is synchronous).
  process.exit(0);
}).catch((e) => { console.error(`etcd3 peer: ${e.stack || e}`); process.exit(1); });
