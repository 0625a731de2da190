#!/usr/bin/python3
"""tooz (python3-tooz) locks through one coordinator per client; --url is
the tooz backend URL (redis://, postgresql://, mysql://, zookeeper://).
Blocking acquire: redis and zookeeper drivers wait on the server side
(redis: redis-py lock polling); postgresql and mysql retry in a loop."""
import uuid

import pbr.version
import tooz.coordination
import peercommon as pc


def main():
    args = pc.arg_parser(__doc__).parse_args()
    driver = args.url.split(":", 1)[0]

    class S:
        def __init__(self, i):
            self.c = tooz.coordination.get_coordinator(
                args.url, f"bench-{i}-{uuid.uuid4().hex[:8]}".encode())
            self.c.start()
            self.lock = None

        def try_acquire(self, name):
            self.lock = self.c.get_lock(name.replace("/", "_").encode())
            return self.lock.acquire(blocking=False)

        def acquire(self, name, timeout):
            self.lock = self.c.get_lock(name.replace("/", "_").encode())
            return self.lock.acquire(blocking=timeout)

        def release(self):
            self.lock.release()

        def close(self):
            self.c.stop()
    try:
        version = pbr.version.VersionInfo("tooz").version_string()
    except Exception:  # noqa: BLE001
        version = "?"
    return pc.run(args, f"tooz {version} ({driver})", driver, S)


if __name__ == "__main__":
    raise SystemExit(main())
