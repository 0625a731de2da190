"""baton: distributed locks, leases, fair lock queues and leader election
on nine stores, through libbaton.so (the C ABI of baton's C++ client).

    import baton
    client = baton.connect("baton://127.0.0.1:7420")          # any store URL
    with client.lock("nightly", ttl="30s", wait="10s") as lease:
        write(lease.fencing_token)       # lease.lost: set at the local safe deadline

asyncio: baton.aio. Documentation: docs/python.md in the repository.
"""

from ._client import Client, connect, random_token
from ._elector import Elector
from ._errors import (BatonError, Cancelled, Holder, InternalError, InvalidArgument,
                      LockLost, NotAcquired, PermissionDenied, Timeout, Unavailable,
                      Unsupported)
from ._held import Cancel, Counter, HeldLease, LockRequest
from ._lib import lib as _cdll
from ._values import Duration, Grant, Leader, Lease, LockInfo, Waiter

__version__ = "0.1.0"
#: The loaded libbaton.so's version ("0.1.0").
library_version: str = (_cdll.baton_version_string() or b"").decode()

# (A literal list: type checkers read it to know what the package exports.)
__all__ = [
    "BatonError", "Cancel", "Cancelled", "Client", "Counter", "Duration", "Elector",
    "Grant", "HeldLease", "Holder", "InternalError", "InvalidArgument", "Leader", "Lease",
    "LockInfo", "LockLost", "LockRequest", "NotAcquired", "PermissionDenied", "Timeout",
    "Unavailable", "Unsupported", "Waiter", "connect", "random_token",
]
