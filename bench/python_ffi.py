#!/usr/bin/python3
"""bench/python_ffi.py — what one try-acquire + release + lease-destroy on
memory: costs through raw ctypes calls, cffi in ABI mode, cffi in API mode
(compiled in a temp dir: python3-cffi, python3-dev, a C compiler) and the
package (baton.Client). The best of 15 rounds of 2 x 20000 pairs each
(the least disturbed by other load). Run from the repository with
PYTHONPATH=python BATON_LIBRARY=<build>/src/capi/libbaton.so.0."""
import ctypes
import os
import sys
import tempfile
import timeit

import baton
from baton._lib import lib
from cffi import FFI

LIBRARY = os.path.abspath(os.environ["BATON_LIBRARY"])
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CDEF = """
typedef struct baton_client baton_client_t; typedef struct baton_lease baton_lease_t;
typedef struct baton_error baton_error_t;
typedef struct baton_acquire_options baton_acquire_options_t;
baton_error_t* baton_client_open(const char*, const void*, baton_client_t**);
baton_error_t* baton_client_try_acquire(baton_client_t*, const char*,
                                        const baton_acquire_options_t*, baton_lease_t**);
baton_error_t* baton_client_release(baton_client_t*, const baton_lease_t*, int*);
void baton_lease_destroy(baton_lease_t*);
"""


def cffi_pair(ffi, L):
    cp = ffi.new("baton_client_t**")
    assert L.baton_client_open(b"memory:", ffi.NULL, cp) == ffi.NULL
    c, out = cp[0], ffi.new("baton_lease_t**")

    def pair():
        L.baton_client_try_acquire(c, b"x", ffi.NULL, out)
        L.baton_client_release(c, out[0], ffi.NULL)
        L.baton_lease_destroy(out[0])
    return pair


def api_mode():
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source("_baton_cffi_api", '#include "baton/baton.h"',
                   include_dirs=[os.path.join(REPO, "include")],
                   extra_link_args=[LIBRARY, "-Wl,-rpath," + os.path.dirname(LIBRARY)])
    tmp = tempfile.mkdtemp(prefix="baton-cffi-")
    ffi.compile(tmpdir=tmp)
    sys.path.insert(0, tmp)
    import _baton_cffi_api as m
    return m.ffi, m.lib


def main():
    abi = FFI()
    abi.cdef(CDEF)
    c = baton.connect("memory:")
    cp = c._h._box[0]

    def ctypes_pair():
        o = ctypes.c_void_p()
        lib.baton_client_try_acquire(cp, b"x", None, ctypes.byref(o))
        lib.baton_client_release(cp, o, None)
        lib.baton_lease_destroy(o)

    def package_pair():
        c.release(c.try_acquire("x"))
    fns = [("ctypes", ctypes_pair), ("cffi ABI", cffi_pair(abi, abi.dlopen(LIBRARY))),
           ("cffi API", cffi_pair(*api_mode())), ("baton package", package_pair)]
    best = {name: 1e9 for name, _ in fns}
    for _ in range(15):
        for name, f in fns:
            best[name] = min(best[name], min(timeit.repeat(f, number=20000, repeat=2)) / 20000 * 1e6)
    print(" | ".join(f"{k} {v:.2f} µs" for k, v in best.items()))


if __name__ == "__main__":
    main()
