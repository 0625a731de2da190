"""The C ABI of libbaton.so (include/baton/baton.h) through ctypes.

ctypes releases the GIL around every call of a CDLL function, so a call
that blocks (an acquire waiting in the store's queue, a _destroy waiting
for a callback) blocks only its own thread, as the header asks.

Handles are plain integers (c_void_p); the library checks each one it is
given. Which libbaton.so is loaded, in order: the file named by the
environment variable BATON_LIBRARY; the copy bundled in the wheel
(baton/_native/libbaton.so.0); the system's (ldconfig, LD_LIBRARY_PATH).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (
    CFUNCTYPE,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any, Dict, List, Optional, Tuple

P = c_void_p
S = c_char_p
I64 = c_int64
PP = ctypes.POINTER(c_void_p)

# The SONAME this binding is written for, and the oldest library version
# (BATON_VERSION_NUMBER) that has every function declared below.
SONAME = "libbaton.so.0"
MIN_VERSION = (0 << 16) | (1 << 8) | 0

FOREVER = 2**63 - 1  # BATON_FOREVER

# Error codes (baton_errc_t).
OK, NOT_ACQUIRED, TIMEOUT, LOCK_LOST, INVALID_ARGUMENT = 0, 1, 2, 3, 4
UNAVAILABLE, PERMISSION_DENIED, INTERNAL, CANCELLED, UNSUPPORTED = 5, 6, 7, 8, 9

LOST_FN = CFUNCTYPE(None, c_void_p, c_void_p)  # (const baton_error_t*, user)
ELECTED_FN = CFUNCTYPE(None, c_void_p, c_void_p)  # (const baton_lease_t*, user)
LEADER_FN = CFUNCTYPE(None, c_char_p, c_void_p)  # (const char* label, user)

# name: (restype, argtypes). Every function of baton.h the binding calls.
_PROTOTYPES: Dict[str, Tuple[Any, List[Any]]] = {
    "baton_version": (c_int, []),
    "baton_version_string": (S, []),
    "baton_errc_name": (S, [c_int]),
    "baton_error_code": (c_int, [P]),
    "baton_error_message": (S, [P]),
    "baton_error_holders": (P, [P]),
    "baton_error_retry_after_ms": (I64, [P]),
    "baton_error_destroy": (None, [P]),
    "baton_holders_count": (c_size_t, [P]),
    "baton_holders_label": (S, [P, c_size_t]),
    "baton_holders_fencing_token": (c_uint64, [P, c_size_t]),
    "baton_holders_time_left_ms": (I64, [P, c_size_t]),
    "baton_holders_holds": (c_uint32, [P, c_size_t]),
    "baton_holders_shared": (c_int, [P, c_size_t]),
    "baton_parse_duration": (P, [S, ctypes.POINTER(I64)]),
    "baton_token_random": (P, [ctypes.c_char * 33]),
    "baton_cancel_new": (P, []),
    "baton_cancel_request": (None, [P]),
    "baton_cancel_requested": (c_int, [P]),
    "baton_cancel_destroy": (None, [P]),
    "baton_client_options_new": (P, []),
    "baton_client_options_destroy": (None, [P]),
    "baton_client_options_set_label": (P, [P, S]),
    "baton_client_options_set_request_timeout": (P, [P, I64]),
    "baton_client_options_set_retry_interval": (P, [P, I64]),
    "baton_client_options_set_max_retries": (P, [P, c_int]),
    "baton_client_options_set_drift": (P, [P, c_double, I64]),
    "baton_acquire_options_new": (P, []),
    "baton_acquire_options_destroy": (None, [P]),
    "baton_acquire_options_set_ttl": (P, [P, I64]),
    "baton_acquire_options_set_capacity": (P, [P, c_uint32]),
    "baton_acquire_options_set_label": (P, [P, S]),
    "baton_acquire_options_set_reentrancy_key": (P, [P, S]),
    "baton_acquire_options_set_token": (P, [P, S]),
    "baton_client_open": (P, [S, P, PP]),
    "baton_client_destroy": (None, [P]),
    "baton_client_label": (S, [P]),
    "baton_client_url": (S, [P]),
    "baton_client_try_acquire": (P, [P, S, P, PP]),
    "baton_client_acquire": (P, [P, S, I64, P, P, PP]),
    "baton_client_acquire_shared": (P, [P, S, I64, P, P, PP]),
    "baton_client_extend": (P, [P, P, I64, PP]),
    "baton_client_release": (P, [P, P, ctypes.POINTER(c_int)]),
    "baton_client_describe": (P, [P, S, PP]),
    "baton_client_list": (P, [P, S, c_size_t, PP]),
    "baton_client_acquire_some": (
        P,
        [P, ctypes.POINTER(c_char_p), c_size_t, S, I64, P, P, PP],
    ),
    "baton_client_acquire_all": (
        P,
        [P, ctypes.POINTER(c_char_p), c_size_t, I64, P, P, PP],
    ),
    "baton_lease_new": (P, [S, S, I64, PP]),
    "baton_lease_copy": (P, [P]),
    "baton_lease_destroy": (None, [P]),
    "baton_lease_name": (S, [P]),
    "baton_lease_token": (S, [P]),
    "baton_lease_fencing_token": (c_uint64, [P]),
    "baton_lease_ttl_ms": (I64, [P]),
    "baton_lease_holds": (c_uint32, [P]),
    "baton_lease_capacity": (c_uint32, [P]),
    "baton_lease_shared": (c_int, [P]),
    "baton_lease_local_deadline_ns": (I64, [P]),
    "baton_lease_time_left_ms": (I64, [P]),
    "baton_lease_store_expires_at_ms": (I64, [P]),
    "baton_lease_list_count": (c_size_t, [P]),
    "baton_lease_list_get": (P, [P, c_size_t]),
    "baton_lease_list_destroy": (None, [P]),
    "baton_lock_info_name": (S, [P]),
    "baton_lock_info_capacity": (c_uint32, [P]),
    "baton_lock_info_last_fencing_token": (c_uint64, [P]),
    "baton_lock_info_is_free": (c_int, [P]),
    "baton_lock_info_holders": (P, [P]),
    "baton_lock_info_waiter_count": (c_size_t, [P]),
    "baton_lock_info_waiter_label": (S, [P, c_size_t]),
    "baton_lock_info_waiter_waited_ms": (I64, [P, c_size_t]),
    "baton_lock_info_waiter_all_or_nothing": (c_int, [P, c_size_t]),
    "baton_lock_info_waiter_shared": (c_int, [P, c_size_t]),
    "baton_lock_info_destroy": (None, [P]),
    "baton_lock_list_count": (c_size_t, [P]),
    "baton_lock_list_get": (P, [P, c_size_t]),
    "baton_lock_list_destroy": (None, [P]),
    "baton_keeper_options_new": (P, []),
    "baton_keeper_options_destroy": (None, [P]),
    "baton_keeper_options_set_renew_interval": (P, [P, I64]),
    "baton_keeper_options_set_lost_fd": (P, [P, c_int]),
    "baton_keeper_acquire": (P, [P, S, I64, P, P, P, PP]),
    "baton_keeper_acquire_shared": (P, [P, S, I64, P, P, P, PP]),
    "baton_keeper_new": (P, [P, P, P, PP]),
    "baton_keeper_lease": (P, [P, PP]),
    "baton_keeper_lost": (c_int, [P]),
    "baton_keeper_safe_deadline_ns": (I64, [P]),
    "baton_keeper_release": (P, [P, ctypes.POINTER(c_int)]),
    "baton_keeper_destroy": (None, [P]),
    "baton_elector_options_new": (P, []),
    "baton_elector_options_destroy": (None, [P]),
    "baton_elector_options_set_ttl": (P, [P, I64]),
    "baton_elector_options_set_retry_interval": (P, [P, I64]),
    "baton_elector_options_set_label": (P, [P, S]),
    "baton_elector_options_set_on_elected": (P, [P, ELECTED_FN, P]),
    "baton_elector_options_set_on_new_leader": (P, [P, LEADER_FN, P]),
    "baton_elector_options_set_lost_fd": (P, [P, c_int]),
    "baton_elector_new": (P, [P, S, P, PP]),
    "baton_elector_campaign": (P, [P, I64, P]),
    "baton_elector_resign": (P, [P]),
    "baton_elector_observe": (P, [P, PP]),
    "baton_elector_is_leader": (c_int, [P]),
    "baton_elector_cancelled": (c_int, [P]),
    "baton_elector_lease": (P, [P, PP]),
    "baton_elector_safe_deadline_ns": (I64, [P]),
    "baton_elector_destroy": (None, [P]),
    "baton_leader_label": (S, [P]),
    "baton_leader_fencing_token": (c_uint64, [P]),
    "baton_leader_time_left_ms": (I64, [P]),
    "baton_leader_destroy": (None, [P]),
    "baton_counter_new": (P, [P, S, PP]),
    "baton_counter_name": (S, [P]),
    "baton_counter_get": (P, [P, ctypes.POINTER(I64)]),
    "baton_counter_add": (P, [P, I64, ctypes.POINTER(I64)]),
    "baton_counter_take": (P, [P, I64, ctypes.POINTER(I64)]),
    "baton_counter_destroy": (None, [P]),
}


def _candidates() -> List[str]:
    env = os.environ.get("BATON_LIBRARY")
    if env:
        return [env]  # named explicitly: nothing else is tried
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")
    found = [os.path.join(here, SONAME)] if os.path.exists(os.path.join(here, SONAME)) else []
    return found + [SONAME, ctypes.util.find_library("baton") or SONAME]


def _load() -> ctypes.CDLL:
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        version = lib.baton_version()
        if version >> 16 != MIN_VERSION >> 16 or version < MIN_VERSION:
            errors.append(
                f"{path}: version {version >> 16}.{(version >> 8) & 255}."
                f"{version & 255}, this package needs 0.1.0 or later"
            )
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return lib
    raise ImportError(
        "baton: cannot load libbaton.so ("
        + "; ".join(errors)
        + "). Install the wheel built from the repository, or set "
        "BATON_LIBRARY to a libbaton.so.0; the store client libraries it "
        "links (libpq5, libhiredis0.14, libzookeeper-mt2, libmariadb3, "
        "libgrpc++1.51, libsqlite3-0) must be installed."
    )


lib = _load()
path: Optional[str] = getattr(lib, "_name", None)
