"""What every server process does before it serves, and how it reports an operator's error:
shared by the single server (server.py) and each of ``--processes N`` (processes.py)."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from l3p.core.bundle_format import BundleError, read_manifest
from l3p.core.errors import L3PError
from l3p.serving.repository import ModelSpec, check_models
from l3p.serving.security import Security, security_from_args
from l3p.serving.threads import limit_blas_threads


class ServeError(L3PError):
    """The server cannot start as asked (a busy port, say)."""


def report(exc: L3PError) -> int:
    """For entry points that do not pass through the ``l3p`` command (``python -m l3p.serving``,
    each of ``--processes N``): the same one line it prints; the exit code."""
    print(f"l3p serve: error: {exc}", file=sys.stderr, flush=True)
    return exc.exit_code


def model_spec(args: argparse.Namespace) -> ModelSpec:
    """What to serve, from --models/--bundle and the pins; BundleError for what can be told
    without loading a graph (no models, a bad manifest, a pin that cannot match)."""
    if args.bundle_sha256 is not None and args.bundle is None:
        raise BundleError("--bundle-sha256 goes with --bundle; with --models pin each model with "
                          "--model-sha256 NAME=HEX")
    pins: dict[str, frozenset[str]] = {}
    for name, digest in args.model_sha256:
        pins[name] = pins.get(name, frozenset()) | {digest}
    if args.bundle is not None:
        if args.bundle_sha256 is not None:
            pins[ModelSpec.bundle_name(args.bundle)] = frozenset({args.bundle_sha256})
        spec = ModelSpec(bundle=args.bundle, pins=pins, default=args.default_model)
    else:
        spec = ModelSpec(root=args.models, pins=pins, default=args.default_model)
    found = spec.sources()  # fail fast, before a process is spawned or a graph loaded
    check_models(found, spec.pins, spec.default)
    for candidate in found.values():
        read_manifest(candidate.path)
    return spec


def prepare(args: argparse.Namespace) -> tuple[ModelSpec, Security, dict[str, int]]:
    """What to serve, the security settings and the BLAS pool sizes, or BundleError /
    SecurityConfigError. Caps BLAS at one thread first: the server owns its CPU, whatever
    environment it was started from."""
    blas = limit_blas_threads(1)
    security = security_from_args(args)
    return model_spec(args), security, blas


def exit_with_parent(pid: int) -> None:
    """Ask the kernel for SIGTERM when our parent dies (PR_SET_PDEATHSIG); if it is already gone
    (we were re-parented before asking), send SIGTERM to ourselves now."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != pid:
        signal.raise_signal(signal.SIGTERM)
