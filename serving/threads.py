"""The server owns its CPU: one BLAS thread and one onnxruntime thread per call, whatever the
environment it was started from says.

OpenBLAS, MKL and OpenMP size their pools from the machine's cores unless told otherwise, and a
pool per calling thread on a 2-core machine turned 32 concurrent episode starts from 70 ms into
2-45 s. The limit is set through threadpoolctl, at run time, so it holds however the
process was started (no OMP_NUM_THREADS needed in the caller's shell).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy  # noqa: F401  (loads numpy's BLAS, the pool to limit)
from threadpoolctl import threadpool_info, threadpool_limits

# Environment variables that size native thread pools; tools that want to show the server runs
# without them (tests, benchmarks) remove these from the server's environment.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
)


def limit_blas_threads(threads: int = 1) -> dict[str, int]:
    """Caps every BLAS / OpenMP pool loaded in this process at `threads`; their sizes after."""
    threadpool_limits(limits=threads)
    return blas_pool_sizes()


def blas_pool_sizes() -> dict[str, int]:
    """Threads per loaded BLAS / OpenMP library, e.g. {"openblas": 1}."""
    sizes: dict[str, int] = {}
    for pool in threadpool_info():
        name = pool.get("internal_api") or pool.get("prefix", "unknown")
        sizes[name] = max(sizes.get(name, 0), int(pool["num_threads"]))
    return sizes


def without_thread_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of environ without THREAD_VARIABLES (like a user's shell)."""
    return {key: value for key, value in environ.items() if key not in THREAD_VARIABLES}
