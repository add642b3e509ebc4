"""What every server process does before it serves, and how it reports an operator's error:
shared by the single server (server.py) and each of ``--processes N`` (processes.py)."""

from __future__ import annotations

import os
import signal
import sys

from l3p.core.bundle_format import BundleError, check_pin, read_manifest
from l3p.core.errors import L3PError
from l3p.core.signing import TrustedKeys, verify_bundle
from l3p.serving.repository import ModelSpec, check_models
from l3p.serving.config import ServeConfig
from l3p.serving.security import Security, security_from_config
from l3p.serving.threads import limit_blas_threads


class ServeError(L3PError):
    """The server cannot start as asked (a busy port, say)."""


def report(exc: L3PError) -> int:
    """For entry points that do not pass through the ``l3p`` command (``python -m l3p.serving``,
    each of ``--processes N``): the same one line it prints; the exit code."""
    print(f"l3p serve: error: {exc}", file=sys.stderr, flush=True)
    return exc.exit_code


def model_spec(config: ServeConfig) -> ModelSpec:
    """What to serve, from --models/--bundle, the pins and the trusted keys; BundleError for what
    can be told without loading a graph (no models, a bad manifest, a pin that cannot match, a
    missing or bad signature), KeyFileError for a bad --trusted-keys file."""
    if config.bundle_sha256 is not None and config.bundle is None:
        raise BundleError("--bundle-sha256 goes with --bundle; with --models pin each model with "
                          "--model-sha256 NAME=HEX")
    pins: dict[str, frozenset[str]] = {}
    for name, digest in config.model_sha256:
        pins[name] = pins.get(name, frozenset()) | {digest}
    checks = {"trusted": None if config.trusted_keys is None else TrustedKeys.load(config.trusted_keys),
              "max_file_bytes": config.max_file_bytes, "load_timeout_s": config.load_timeout}
    if config.bundle is not None:
        if config.bundle_sha256 is not None:
            pins[ModelSpec.bundle_name(config.bundle)] = frozenset({config.bundle_sha256})
        spec = ModelSpec(bundle=config.bundle, pins=pins, default=config.default_model, **checks)
    else:
        spec = ModelSpec(root=config.models, pins=pins, default=config.default_model, **checks)
    found = spec.sources()  # fail fast, before a process is spawned or a graph loaded
    check_models(found, spec.pins, spec.default)
    for candidate in found.values():
        if candidate.refusal:  # logged and listed by the server; the others are served
            continue
        manifest = read_manifest(candidate.path)
        if spec.trusted is not None:
            verify_bundle(candidate.path, check_pin(candidate.path, manifest, None), spec.trusted,
                          candidate.label())
    return spec


def prepare(config: ServeConfig) -> tuple[ModelSpec, Security, dict[str, int]]:
    """What to serve, the security settings and the BLAS pool sizes, or BundleError /
    SecurityConfigError. Caps BLAS at one thread first: the server owns its CPU, whatever
    environment it was started from."""
    blas = limit_blas_threads(1)
    security = security_from_config(config)
    return model_spec(config), security, blas


def exit_with_parent(pid: int) -> None:
    """Ask the kernel for SIGTERM when our parent dies (PR_SET_PDEATHSIG); if it is already gone
    (we were re-parented before asking), send SIGTERM to ourselves now."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != pid:
        signal.raise_signal(signal.SIGTERM)
