"""Type-checked by the ctest python_mypy (never run): what a user writes
must check under mypy --strict against the package's exports."""

import baton
import baton.aio

def f(c: baton.Client) -> int:
    try:
        with c.lock("x", ttl="30s", wait="10s") as lease:
            return lease.fencing_token
    except baton.NotAcquired as e:
        return len(e.holders)
    except baton.aio.Timeout:
        return -1
    except baton.Unavailable as e:
        # a timedelta, None if the store did not say
        return int(e.retry_after.total_seconds()) if e.retry_after else 0

async def g() -> int:
    c = baton.aio.connect("memory:")
    lease = await c.acquire("x", wait="1s")
    return lease.fencing_token
