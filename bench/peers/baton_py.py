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
    if args.url == "floor:":
        return floor(args)

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


def floor(args):
    """--url floor: the least a pair can cost through ctypes in this
    harness: the package's three C calls per pair (acquire, release, the
    lease's destroy) replaced by one call each of an empty C function
    (baton_cancel_requested reads one flag), and no store."""
    from baton._lib import lib
    flag = lib.baton_cancel_new()
    call = lib.baton_cancel_requested

    class F:
        def try_acquire(self, name):
            call(flag)
            return True

        def acquire(self, name, timeout):
            call(flag)
            return True

        def release(self):
            call(flag)
            call(flag)
    try:
        return pc.run(args, "Python harness + 3 empty C calls", "floor", lambda i: F())
    finally:
        lib.baton_cancel_destroy(flag)


if __name__ == "__main__":
    raise SystemExit(main())
