#!/usr/bin/python3
"""redis-py (python3-redis) Lock: SET NX PX + Lua compare-and-delete.
Blocking acquire polls (redis-py's default sleep 0.1 s)."""
import redis
import peercommon as pc


def main():
    args = pc.arg_parser(__doc__).parse_args()
    host, port = args.url.rsplit(":", 1)

    class S:
        def __init__(self):
            self.r = redis.Redis(host=host, port=int(port))
            self.lock = None

        def try_acquire(self, name):
            self.lock = self.r.lock(name, timeout=30)
            return self.lock.acquire(blocking=False)

        def acquire(self, name, timeout):
            self.lock = self.r.lock(name, timeout=30)
            return self.lock.acquire(blocking=True, blocking_timeout=timeout)

        def release(self):
            self.lock.release()

        def close(self):
            self.r.close()
    return pc.run(args, f"redis-py {redis.__version__} Lock", "redis",
                  lambda i: S())


if __name__ == "__main__":
    raise SystemExit(main())
