#!/usr/bin/python3
"""python3-etcd3 Lock: a transaction creating the key if absent, with a
lease. Its blocking acquire (acquire(timeout>0)) fails on Debian 12 with
"TypeError: ... wait() missing 1 required positional argument" (the
library's retry code against Debian's newer tenacity), so contended clients
retry acquire(timeout=0) every 10 ms here, as a user would have to."""
import time

import etcd3
import peercommon as pc


def main():
    args = pc.arg_parser(__doc__).parse_args()
    host, port = args.url.rsplit(":", 1)

    class S:
        def __init__(self):
            self.c = etcd3.client(host=host, port=int(port))
            self.lock = None

        def try_acquire(self, name):
            self.lock = self.c.lock(name, ttl=30)
            return self.lock.acquire(timeout=0)

        def acquire(self, name, timeout):
            end = time.monotonic() + timeout
            while True:
                if self.try_acquire(name):
                    return True
                if time.monotonic() + 0.01 >= end:
                    return False
                time.sleep(0.01)

        def release(self):
            self.lock.release()

        def close(self):
            self.c.close()
    version = getattr(etcd3, "__version__", "?")
    return pc.run(args, f"python-etcd3 {version} Lock", "etcd",
                  lambda i: S())


if __name__ == "__main__":
    raise SystemExit(main())
