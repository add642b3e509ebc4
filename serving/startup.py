"""What every server process does before it serves, and how it reports an operator's error:
shared by the single server (server.py) and each of ``--processes N`` (processes.py)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
from pathlib import Path

from l3p.core.bundle_format import BundleError, check_pin, read_manifest
from l3p.core.errors import L3PError
from l3p.core.signing import TrustedKeys, verify_bundle
from l3p.serving.repository import ModelSpec, check_models
from l3p.serving.config import ServeConfig
from l3p.serving.security import Security, security_from_config
from l3p.serving.sequences import ServedSequences, check_sequence
from l3p.serving.threads import limit_blas_threads


# Port 0 on a host of several addresses: the port the first address got may be taken on another.
_PORT_0_TRIES = 8


class ServeError(L3PError):
    """The server cannot start as asked (a busy port, say)."""


def bind_error(host: str, port: int, option: str, exc: OSError) -> ServeError:
    """One line naming the address, the option that chose it and the reason."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    reason = (exc.strerror or str(exc)).lower()
    if exc.errno == errno.EADDRINUSE:
        reason += f" (another server holds it: stop that one or choose another {option})"
    return ServeError(f"cannot bind {address} ({option}): {reason}")


class HeldPort:
    """A port bound on every address of a host by sockets that never listen (so they take no
    connection); close() frees it."""

    def __init__(self, sockets: list[socket.socket]):
        self.sockets = sockets
        self.port: int = sockets[0].getsockname()[1]

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()

    def __enter__(self) -> HeldPort:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bind_port(host: str, port: int, option: str = "--port", *, shared: bool = False) -> HeldPort:
    """host:port bound on every address host names (localhost: 127.0.0.1 and ::1, where it names
    both), as gRPC binds them all, but those this host lacks; port 0: one free on each of them.
    ServeError (bind_error) if any socket already holds the port on any of those addresses, one that
    allows SO_REUSEPORT included.

    shared: the port is then held for the processes of one server: only sockets that ask for
    SO_REUSEPORT (and, on Linux, belong to the same user) may bind it while this one is open;
    any other bind is refused."""
    try:
        addresses = list(dict.fromkeys((family, address) for family, _, _, _, address in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)))
    except OSError as exc:
        raise bind_error(host, port, option, exc) from None
    error = None
    for _ in range(_PORT_0_TRIES if port == 0 and len(addresses) > 1 else 1):
        try:
            return HeldPort(_bind_all(addresses, shared))
        except OSError as exc:  # with port 0: the port the first address got is taken on another
            error = exc
    raise bind_error(host, port, option, error) from None


def _bind_all(addresses: list[tuple], shared: bool) -> list[socket.socket]:
    """Every (family, address) bound, on the port the first one got when that is 0, but for those
    this host lacks (::1 without IPv6, which gRPC skips too); OSError if another cannot be bound,
    or none can."""
    held: list[socket.socket] = []
    try:
        for family, address in addresses:
            if held:
                address = (address[0], held[0].getsockname()[1], *address[2:])
            try:
                held.append(_bound(family, address, shared))
            except OSError as exc:
                if exc.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                    raise
                lacking = exc
        if not held:
            raise lacking
        return held
    except BaseException:
        for sock in held:
            sock.close()
        raise


def _bound(family: socket.AddressFamily, address: tuple, shared: bool) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # SO_REUSEADDR: the connections of a server that just stopped (TIME_WAIT) don't hold the
        # port. No SO_REUSEPORT yet: with it the bind would succeed beside SO_REUSEPORT listeners,
        # another server's processes.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        if shared:
            # Once bound: a bound socket without SO_REUSEADDR refuses every bind beside it that
            # does not ask for SO_REUSEPORT itself.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def check_port(host: str, port: int, option: str = "--port") -> None:
    """ServeError (bind_error) if host:port cannot be bound now."""
    bind_port(host, port, option).close()


def report(exc: L3PError) -> int:
    """For entry points that do not pass through the ``l3p`` command (``python -m l3p.serving``,
    each of ``--processes N``): the same one line it prints; the exit code."""
    print(f"l3p serve: error: {exc}", file=sys.stderr, flush=True)
    return exc.exit_code


def model_spec(config: ServeConfig) -> ModelSpec:
    """What to serve, from --models/--bundle, the pins, the trusted keys and the served-sequences
    file; BundleError for what can be told without loading a graph (no models, a bad manifest, a
    pin that cannot match, a missing or bad signature, one for another model or below the highest
    sequence served), KeyFileError for a bad --trusted-keys file."""
    if config.bundle_sha256 is not None and config.bundle is None:
        raise BundleError("--bundle-sha256 goes with --bundle; with --models pin each model with "
                          "--model-sha256 NAME=HEX")
    if config.served_sequences is not None and config.trusted_keys is None:
        raise BundleError("--served-sequences keeps the sequences of signatures: it goes with --trusted-keys")
    pins: dict[str, frozenset[str]] = {}
    for name, digest in config.model_sha256:
        pins[name] = pins.get(name, frozenset()) | {digest}
    checks = {"trusted": None if config.trusted_keys is None else TrustedKeys.load(config.trusted_keys),
              "sequences": config.served_sequences, "max_file_bytes": config.max_file_bytes,
              "load_timeout_s": config.load_timeout}
    if config.bundle is not None:
        if config.bundle_sha256 is not None:
            pins[ModelSpec.bundle_name(config.bundle)] = frozenset({config.bundle_sha256})
        spec = ModelSpec(bundle=config.bundle, pins=pins, default=config.default_model, **checks)
    else:
        spec = ModelSpec(root=config.models, pins=pins, default=config.default_model, **checks)
    found = spec.sources()  # fail fast, before a process is spawned or a graph loaded
    check_models(found, spec.pins, spec.default)
    sequences = None if spec.trusted is None else ServedSequences(spec.sequences)
    if sequences is not None:
        _check_outside(sequences.path, spec.root or spec.bundle)
    for candidate in found.values():
        if candidate.refusal:  # logged and listed by the server; the others are served
            continue
        with candidate.open() as directory:
            manifest = read_manifest(directory)
            if sequences is not None:
                digest = check_pin(directory.path, manifest, None, shown=directory.where)
                signature = verify_bundle(directory, digest, spec.trusted, model=candidate.name)
                check_sequence(candidate, signature, sequences)
    return spec


def _check_outside(sequences: Path, repository: Path) -> None:
    """BundleError if the served-sequences file is inside the repository, whose writers could
    then lower the marks that refuse their rollbacks."""
    if Path(os.path.realpath(sequences)).is_relative_to(os.path.realpath(repository)):
        raise BundleError(f"the served-sequences file {sequences} is inside the model repository {repository}: "
                          "whoever can write the repository could lower its marks; keep it outside "
                          "(--served-sequences FILE)")


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
