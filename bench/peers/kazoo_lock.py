#!/usr/bin/python3
"""kazoo (python3-kazoo) Lock on ZooKeeper: ephemeral sequential nodes,
each waiter watching its predecessor (FIFO)."""
import kazoo
from kazoo.client import KazooClient
import peercommon as pc


def main():
    args = pc.arg_parser(__doc__).parse_args()

    class S:
        def __init__(self, i):
            self.zk = KazooClient(hosts=args.url, timeout=10)
            self.zk.start(timeout=10)
            self.i = i
            self.lock = None

        def try_acquire(self, name):
            self.lock = self.zk.Lock("/" + name, str(self.i))
            return self.lock.acquire(blocking=False)

        def acquire(self, name, timeout):
            self.lock = self.zk.Lock("/" + name, str(self.i))
            return self.lock.acquire(blocking=True, timeout=timeout)

        def release(self):
            self.lock.release()

        def close(self):
            self.zk.stop()
            self.zk.close()
    return pc.run(args, f"kazoo {kazoo.version.__version__} Lock", "zookeeper",
                  S)


if __name__ == "__main__":
    raise SystemExit(main())
