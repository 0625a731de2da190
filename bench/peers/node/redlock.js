// npm redlock (v4) on one Redis (a one-instance Redlock: SET NX PX + Lua
// compare-and-delete). Blocking acquire = redlock's retries (retryDelay
// 200 ms + jitter, its defaults), as many as fit in the wait.
'use strict';
const Redis = require('ioredis');
const Redlock = require('redlock');
const { run, version } = require('./common');

run(`redlock ${version('redlock')}`, 'redis', async (i, a) => {
  const [host, port] = a.url.split(':');
  const client = new Redis({ host, port: Number(port), lazyConnect: true });
  await client.connect();
  const once = new Redlock([client], { retryCount: 0 });
  let lock = null;
  return {
    async tryAcquire(name) {
      try { lock = await once.lock(name, 30000); return true; } catch (e) {
        if (e.name === 'LockError') return false; throw e;
      }
    },
    async acquire(name, timeoutMs) {
      const r = new Redlock([client], { retryCount: Math.max(0, Math.floor(timeoutMs / 200)) });
      try { lock = await r.lock(name, 30000); return true; } catch (e) {
        if (e.name === 'LockError') return false; throw e;
      }
    },
    async release() { await lock.unlock(); lock = null; },
    async close() { client.disconnect(); },
  };
}).catch((e) => { console.error(`redlock peer: ${e.stack || e}`); process.exit(1); });
