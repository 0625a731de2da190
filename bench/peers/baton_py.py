#!/usr/bin/python3
"""baton's Python package (python/, over libbaton.so through ctypes) on
the peers' harness: one thread and one baton.Client per client, blocking
acquire waits in the store's FIFO queue (no polling). --url is a baton
store URL (baton://, redis://, postgres://, ...). Run with PYTHONPATH
pointing at python/ and BATON_LIBRARY at the libbaton.so.0 to measure."""
from datetime import timedelta

import baton
import peercommon as pc


def main():
    args = pc.arg_parser(__doc__).parse_args()
    scheme = args.url.split(":", 1)[0]

    class S:
        def __init__(self):
            self.c = baton.connect(args.url)
            self.lease = None

        def try_acquire(self, name):
            try:
                self.lease = self.c.try_acquire(name, ttl="30s")
            except baton.NotAcquired:
                return False
            return True

        def acquire(self, name, timeout):
            try:
                self.lease = self.c.acquire(
                    name, ttl="30s", wait=timedelta(milliseconds=int(timeout * 1000)))
            except baton.Timeout:
                return False
            return True

        def release(self):
            self.c.release(self.lease)
            self.lease = None

        def close(self):
            self.c.close()
    return pc.run(args, f"baton (Python) {baton.__version__}", scheme, lambda i: S())


if __name__ == "__main__":
    raise SystemExit(main())
