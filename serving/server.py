"""The planner server's lifecycle: one loaded bundle shared by many isolated episodes.

    l3p serve --bundle DIR --port 0        # or: python -m l3p.serving --bundle DIR --port 0

An asyncio server (grpc.aio), run as grpc's own asyncio examples run theirs: ``asyncio.run``,
``await server.start()``, ``await server.wait_for_termination()``. A call or an open Control
stream costs no thread. Sessions, unary or stream, expire after --session-ttl seconds without a
call. Requests over MAX_MESSAGE_BYTES are refused with RESOURCE_EXHAUSTED. Once listening, the
server prints ``L3P_SERVER_READY port=<N>`` on stdout; logs are JSON lines on stderr.
SIGTERM/SIGINT (handled on the event loop): health goes NOT_SERVING (health watches end), new
calls are refused, calls in flight get --shutdown-grace seconds to finish; a second signal stops
at once.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Callable

import grpc
from grpc_health.v1 import health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from l3p.serving.bundle import Bundle
from l3p.serving.engine import Engine
from l3p.serving.health import SERVICE_NAME as HEALTH_SERVICE_NAME
from l3p.serving.health import SERVING, HealthService
from l3p.serving.logs import event
from l3p.serving.metrics import Metrics
from l3p.serving.security import AuthInterceptor, Gatekeeper, Security, is_loopback
from l3p.serving.servicer import SERVICE_NAME, PlannerServicer, anonymous, planner_handlers
from l3p.serving.sessions import Session, SessionStore
from l3p.serving.startup import ServeError, exit_with_parent

# Requests are ~100 bytes; a small cap bounds the memory one call can make the server hold.
# gRPC itself answers RESOURCE_EXHAUSTED ("Received message larger than max") past it.
MAX_MESSAGE_BYTES = 64 * 1024

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Ping idle connections so a robot that vanished without closing its stream is noticed, its
    # call cancelled and its session freed.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    # Accept client keepalive pings down to 10 s instead of answering GOAWAY.
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


class PlannerServer:
    """The asyncio gRPC server (planner, health, optionally reflection) and the TTL reaper.

    Made inside a running event loop (grpc.aio binds to it); the port is bound on creation
    (``.port``, RuntimeError if it cannot bind). ``credentials``: TLS for the port (plaintext
    when None). ``gate``: token checks and caller identities (serving/security.py); None admits
    everyone as one anonymous principal. ``replica_id``: prefixes session ids ("ID.") so a proxy
    can route a session's calls here.
    """

    def __init__(
        self,
        bundle: Bundle,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        session_ttl_s: float = 300.0,
        max_sessions: int = 1024,
        batch_delay_s: float = 0.0,
        credentials: grpc.ServerCredentials | None = None,
        gate: Gatekeeper | None = None,
        with_reflection: bool = False,
        replica_id: str | None = None,
    ):
        self.bundle = bundle
        self.store = SessionStore(session_ttl_s, max_sessions, on_expire=self._on_expire,
                                  id_prefix=f"{replica_id}." if replica_id else "")
        self.metrics = Metrics(sessions_live=lambda: len(self.store))
        self.health = HealthService()
        self._reap_every_s = min(1.0, session_ttl_s / 2)
        self._reaper: asyncio.Task | None = None  # set once started
        self._stops: set[asyncio.Task] = set()
        self.engine = Engine(bundle, max_delay_s=batch_delay_s, metrics=self.metrics)
        try:
            self.port = self._create(host, port, credentials, gate, with_reflection)
        except BaseException:
            self.engine.close()
            raise

    def _create(self, host: str, port: int, credentials: grpc.ServerCredentials | None,
                gate: Gatekeeper | None, with_reflection: bool) -> int:
        interceptors = []
        if gate is not None and gate.tokens is not None:
            interceptors.append(AuthInterceptor(gate, SERVICE_NAME, self._on_refused))
        self._server = grpc.aio.server(interceptors=interceptors, options=_CHANNEL_OPTIONS)
        self.servicer = PlannerServicer(self.bundle, self.store, self.metrics, self.engine,
                                        gate.principal if gate is not None else anonymous)
        handlers = planner_handlers(self.servicer)
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),)
        )
        self._server.add_registered_method_handlers(SERVICE_NAME, handlers)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        if with_reflection:
            reflection.enable_server_reflection(
                (SERVICE_NAME, HEALTH_SERVICE_NAME, reflection.SERVICE_NAME), self._server
            )
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if credentials is None:
            return self._server.add_insecure_port(address)
        return self._server.add_secure_port(address, credentials)

    async def start(self) -> None:
        await self._server.start()
        for service in ("", SERVICE_NAME):  # "" is the server as a whole
            self.health.set(service, SERVING)
        self._reaper = asyncio.create_task(self.store.reap(self._reap_every_s), name="l3p-reaper")

    async def stop(self, grace_s: float | None) -> None:
        """Health NOT_SERVING, refuse new calls, give calls in flight grace_s to finish (None:
        cancel them now). A second call with a smaller grace stops sooner (gRPC semantics)."""
        if self._reaper is not None:
            self._reaper.cancel()
        await self.health.enter_graceful_shutdown()
        await self._server.stop(grace_s)

    def stop_soon(self, grace_s: float | None) -> None:
        """Begins stop(grace_s) and returns at once (for signal handlers on the loop)."""
        task = asyncio.get_running_loop().create_task(self.stop(grace_s))
        self._stops.add(task)
        task.add_done_callback(self._stops.discard)

    async def wait_for_termination(self) -> None:
        """Returns once the server has stopped (at once if it never started); frees the engine's
        threads."""
        try:
            if self._reaper is not None:  # grpc's own wait never returns for a server not started
                await self._server.wait_for_termination()
        finally:
            if self._reaper is not None:
                self._reaper.cancel()
            self.engine.close()

    def _on_refused(self, method: str, reason: str) -> None:
        self.metrics.errors.labels(grpc.StatusCode.UNAUTHENTICATED.name).inc()
        event(logging.INFO, "request_refused", method=method, code="UNAUTHENTICATED", message=reason)

    def _on_expire(self, session: Session) -> None:
        self.metrics.sessions_expired.inc()
        event(logging.INFO, "session_expired", session=session.id,
              steps=session.planner.step_count, ttl_s=self.store.ttl_s)


def onnxruntime_threads(bundle: Bundle) -> dict[str, int]:
    """The onnxruntime pool sizes the bundle's sessions run with (the largest over them)."""
    options = [graph.get_session_options() for graph in (bundle.actor, bundle.distance, bundle.value)]
    return {
        "onnxruntime_intra_op_threads": max(o.intra_op_num_threads for o in options),
        "onnxruntime_inter_op_threads": max(o.inter_op_num_threads for o in options),
    }


def serve(args: argparse.Namespace, bundle: Bundle, security: Security, blas: dict[str, int],
          on_ready: Callable[[int], None], **log_fields) -> int:
    """Runs one server process until SIGTERM/SIGINT; calls on_ready(port) once it serves. 0 after
    a shutdown; ServeError if it cannot start (a busy port)."""
    return asyncio.run(_serve(args, bundle, security, blas, on_ready, log_fields))


async def _serve(args: argparse.Namespace, bundle: Bundle, security: Security, blas: dict[str, int],
                 on_ready: Callable[[int], None], log_fields: dict) -> int:
    event(logging.INFO, "thread_pools", blas_threads=blas, **onnxruntime_threads(bundle))
    try:
        server = PlannerServer(
            bundle,
            host=args.host,
            port=args.port,
            session_ttl_s=args.session_ttl,
            max_sessions=args.max_sessions,
            batch_delay_s=args.batch_delay_us * 1e-6,
            credentials=security.credentials,
            gate=security.gate,
            with_reflection=args.reflection,
            replica_id=args.replica_id,
        )
    except RuntimeError as exc:  # grpc raises RuntimeError when it cannot bind
        raise ServeError(str(exc)) from None
    if args.metrics_port:
        try:
            server.metrics.serve_http(args.metrics_port, args.host)
        except OSError as exc:
            await server.stop(None)
            await server.wait_for_termination()
            raise ServeError(f"metrics port {args.metrics_port}: {exc.strerror}") from None

    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal(sig: signal.Signals) -> None:
        nonlocal signals
        signals += 1
        grace = args.shutdown_grace if signals == 1 else 0  # a second signal: stop now
        event(logging.INFO, "shutting_down", signal=sig.name, grace_s=grace)
        server.stop_soon(grace)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)

    await server.start()
    if args.exit_with_parent is not None:
        exit_with_parent(args.exit_with_parent)
    if security.credentials is None and not is_loopback(args.host):
        event(logging.WARNING, "insecure", host=args.host,
              message="plaintext on a non-loopback address (--insecure): tokens and "
                      "observations cross the network unencrypted")
    event(logging.INFO, "serving", host=args.host, port=server.port, env_id=bundle.env_id,
          bundle=str(args.bundle), bundle_sha256=bundle.sha256, n_landmarks=bundle.n_landmarks,
          metrics_port=args.metrics_port or None, session_ttl_s=args.session_ttl,
          max_sessions=args.max_sessions, batch_delay_us=args.batch_delay_us,
          max_message_bytes=MAX_MESSAGE_BYTES, tls=security.credentials is not None,
          mutual_tls=args.tls_client_ca is not None, tokens=args.auth_token_file is not None,
          reflection=args.reflection, replica_id=args.replica_id, **log_fields)
    on_ready(server.port)
    await server.wait_for_termination()
    # grpc's tasks for the last calls may still be sending their final status: let them end
    # before asyncio.run cancels whatever is left (a cancelled send logs an unhandled error).
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait(others, timeout=1.0)
    event(logging.INFO, "stopped", live_sessions=len(server.store))
    return 0
