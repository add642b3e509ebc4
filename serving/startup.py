"""What every server process does before it serves, and how it reports an operator's error:
shared by the single server (server.py) and each of ``--processes N`` (processes.py)."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from l3p.core.errors import L3PError
from l3p.serving.bundle import Bundle, BundleError, load_bundle
from l3p.serving.security import Security, security_from_args
from l3p.serving.threads import limit_blas_threads


class ServeError(L3PError):
    """The server cannot start as asked (a busy port, say)."""


def report(exc: L3PError) -> int:
    """For entry points that do not pass through the ``l3p`` command (``python -m l3p.serving``,
    each of ``--processes N``): the same one line it prints; the exit code."""
    print(f"l3p serve: error: {exc}", file=sys.stderr, flush=True)
    return exc.exit_code


def check_pin(bundle: Bundle, expected: str | None) -> None:
    if expected is not None and bundle.sha256 != expected.lower():
        raise BundleError(
            f"bundle {bundle.path} has digest {bundle.sha256}, not the pinned --bundle-sha256 "
            f"{expected}; refusing to serve it")


def prepare(args: argparse.Namespace) -> tuple[Bundle, Security, dict[str, int]]:
    """The checked bundle, the security settings and the BLAS pool sizes, or BundleError /
    SecurityConfigError. Caps BLAS at one thread first: the server owns its CPU, whatever
    environment it was started from."""
    blas = limit_blas_threads(1)
    security = security_from_args(args)
    bundle = load_bundle(args.bundle)
    check_pin(bundle, args.bundle_sha256)
    return bundle, security, blas


def exit_with_parent(pid: int) -> None:
    """Ask the kernel for SIGTERM when our parent dies (PR_SET_PDEATHSIG); if it is already gone
    (we were re-parented before asking), send SIGTERM to ourselves now."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != pid:
        signal.raise_signal(signal.SIGTERM)
