// npm redis-semaphore Mutex on one Redis (ioredis). Blocking acquire polls
// with its default retryInterval (10 ms).
'use strict';
const Redis = require('ioredis');
const { Mutex } = require('redis-semaphore');
const { run, version } = require('./common');

run(`redis-semaphore ${version('redis-semaphore')} Mutex`, 'redis', async (i, a) => {
  const [host, port] = a.url.split(':');
  const client = new Redis({ host, port: Number(port), lazyConnect: true });
  await client.connect();
  let m = null;
  return {
    async tryAcquire(name) {
      m = new Mutex(client, name, { lockTimeout: 30000, refreshInterval: 0 });
      return m.tryAcquire();
    },
    async acquire(name, timeoutMs) {
      m = new Mutex(client, name, { lockTimeout: 30000, refreshInterval: 0, acquireTimeout: Math.max(1, Math.floor(timeoutMs)) });
      try { await m.acquire(); return true; } catch (e) {
        if (/timeout/i.test(e.message)) return false; throw e;
      }
    },
    async release() { await m.release(); m = null; },
    async close() { client.disconnect(); },
  };
}).catch((e) => { console.error(`redis-semaphore peer: ${e.stack || e}`); process.exit(1); });
