"""The planner server's lifecycle: a repository of loaded models shared by many isolated episodes.

    l3p serve --models DIR --port 0        # every bundle under DIR (serving/repository.py)
    l3p serve --bundle DIR --port 0        # or: python -m l3p.serving --bundle DIR --port 0

An asyncio server (grpc.aio), run as grpc's own asyncio examples run theirs: ``asyncio.run``,
``await server.start()``, ``await server.wait_for_termination()``. A call or an open Control
stream costs no thread. Sessions, unary or stream, expire after --session-ttl seconds without a
call. Requests over MAX_MESSAGE_BYTES are refused with RESOURCE_EXHAUSTED. Once listening, the
server prints ``L3P_SERVER_READY port=<N>`` on stdout; logs are JSON lines on stderr. A port
that any other socket holds is refused in one line (``address already in use``): only the
processes of one ``--processes N`` server share a port (SO_REUSEPORT, serving/processes.py).
SIGTERM/SIGINT (handled on the event loop): health goes NOT_SERVING (health watches end), new
calls are refused, calls in flight get --shutdown-grace seconds to finish; a second signal stops
at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from multiprocessing.sharedctypes import Synchronized

import grpc
from grpc_health.v1 import health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from l3p.serving.bundle import Bundle
from l3p.serving.config import ServeConfig
from l3p.serving.engine import Engine
from l3p.serving.health import SERVICE_NAME as HEALTH_SERVICE_NAME
from l3p.serving.health import SERVING, HealthService
from l3p.serving.logs import SESSIONS, event, limited_event
from l3p.serving.metrics import Metrics
from l3p.serving.repository import ModelSpec, ModelVersion, Repository
from l3p.serving.security import AuthInterceptor, Gatekeeper, Security, is_loopback
from l3p.serving.sequences import ServedSequences
from l3p.serving.servicer import (
    SERVICE_NAME,
    PlannerServicer,
    anonymous,
    planner_handlers,
)
from l3p.serving.sessions import Session, SessionStore
from l3p.serving.startup import ServeError, bind_error, check_port, exit_with_parent

# Requests are ~100 bytes; a small cap bounds the memory one call can make the server hold.
# gRPC itself answers RESOURCE_EXHAUSTED ("Received message larger than max") past it.
MAX_MESSAGE_BYTES = 64 * 1024

# By default, with authentication, one principal may hold 1/DEFAULT_PRINCIPAL_SHARE of the sessions.
DEFAULT_PRINCIPAL_SHARE = 4

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
    """The asyncio gRPC server (planner, health, optionally reflection), the TTL reaper and the
    repository watch.

    Made inside a running event loop (grpc.aio binds to it); ``open()`` loads the models (off the
    loop) and binds the port (``.port``; BundleError if a model cannot be served, ServeError if
    the port cannot be bound); ``start()`` opens it first if that was not done. ``models``: what
    to serve (a ModelSpec), or one loaded Bundle (never swapped). ``credentials``: TLS for the
    port (plaintext when None). ``gate``: token checks and caller identities
    (serving/security.py); None admits everyone as one anonymous principal.
    ``replica_id``: prefixes session ids ("ID.") so a proxy can route a session's calls here.
    ``poll_interval_s``: how often the repository is looked at for new versions (None: never).
    ``share_port``: other SO_REUSEPORT sockets may bind the port too (the processes of one
    ``--processes N`` server); without it any other bind there is refused. ``reloads``: the
    ReloadModels counter those processes share (serving/repository.py).
    """

    def __init__(
        self,
        models: ModelSpec | Bundle,
        *,
        host: str = ServeConfig.host,
        port: int = 0,
        session_ttl_s: float = ServeConfig.session_ttl,
        max_sessions: int = ServeConfig.max_sessions,
        max_sessions_per_principal: int | None = None,
        batch_delay_s: float = ServeConfig.batch_delay_us * 1e-6,
        credentials: grpc.ServerCredentials | None = None,
        gate: Gatekeeper | None = None,
        with_reflection: bool = False,
        replica_id: str | None = None,
        poll_interval_s: float | None = None,
        share_port: bool = False,
        reloads: Synchronized | None = None,
    ):
        self.store = SessionStore(session_ttl_s, max_sessions, on_expire=self._on_expire,
                                  id_prefix=f"{replica_id}." if replica_id else "",
                                  per_principal=max_sessions_per_principal)
        self.metrics = Metrics(sessions_live=lambda: len(self.store))
        self.health = HealthService()
        self._reap_every_s = min(1.0, session_ttl_s / 2)
        self._poll_interval_s = poll_interval_s
        self._tasks: list[asyncio.Task] = []  # the reaper and the watch, once started
        self._stops: set[asyncio.Task] = set()
        self.front_doors: list = []  # other listeners on these sessions (serving/openpi.py)

        def make_engine(bundle: Bundle, name: str) -> Engine:
            return Engine(bundle, max_delay_s=batch_delay_s, metrics=self.metrics.model(name))

        if isinstance(models, Bundle):
            self.models = Repository.of_bundle(models, make_engine, self._on_model,
                                               metrics=self.metrics)
        else:
            self.models = Repository(models.sources, models.pins, make_engine, models.default,
                                     self._on_model, metrics=self.metrics,
                                     pin_option=models.pin_option, trusted=models.trusted,
                                     max_file_bytes=models.max_file_bytes,
                                     load_timeout_s=models.load_timeout_s,
                                     poll_interval_s=poll_interval_s,
                                     sequences=ServedSequences(models.sequences), reloads=reloads)
        self._to_load = not isinstance(models, Bundle)
        self._listen = dict(host=host, port=port, credentials=credentials, gate=gate,
                            with_reflection=with_reflection, share_port=share_port)
        self.port: int | None = None

    async def open(self) -> int:
        """Loads the models, then binds the port; the port. On failure nothing stays loaded."""
        try:
            if self._to_load:
                await self.models.load_all()
            try:
                self.port = self._create(**self._listen)
            except RuntimeError as exc:  # grpc raises RuntimeError when it cannot bind
                if not self._listen["share_port"]:  # taken while the models loaded: say by what, if it still is
                    check_port(self._listen["host"], self._listen["port"])
                raise ServeError(str(exc)) from None
        except BaseException:
            self.models.close()
            raise
        return self.port

    def _create(self, host: str, port: int, credentials: grpc.ServerCredentials | None,
                gate: Gatekeeper | None, with_reflection: bool, share_port: bool) -> int:
        interceptors = []
        if gate is not None and (gate.tokens is not None or gate.admin is not None):
            interceptors.append(AuthInterceptor(gate, SERVICE_NAME, self._on_refused))
        # gRPC turns SO_REUSEPORT on unless told: a second server would bind beside this one and
        # the kernel would hand it a share of the new connections.
        options = [*_CHANNEL_OPTIONS, ("grpc.so_reuseport", int(share_port))]
        self._server = grpc.aio.server(interceptors=interceptors, options=options)
        self.servicer = PlannerServicer(
            self.models, self.store, self.metrics,
            gate.principal if gate is not None else anonymous,
            may_reload=lambda: gate is not None and gate.admin is not None)
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
        if self.port is None:
            await self.open()
        await self._server.start()
        for service in ("", SERVICE_NAME):  # "" is the server as a whole
            self.health.set(service, SERVING)
        for version in self.models.versions():
            self._on_model(version, "loaded")
        self._tasks.append(asyncio.create_task(self.store.reap(self._reap_every_s), name="l3p-reaper"))
        if self._poll_interval_s is not None:
            self._tasks.append(asyncio.create_task(self._watch(self._poll_interval_s), name="l3p-watch"))

    async def _watch(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.models.refresh()
            except Exception as exc:  # a bug must not end the watch: the next poll tries again
                event(logging.ERROR, "watch_failed", exc, error=repr(exc))

    async def stop(self, grace_s: float | None) -> None:
        """Health NOT_SERVING, refuse new calls, give calls in flight grace_s to finish (None:
        cancel them now). A second call with a smaller grace stops sooner (gRPC semantics)."""
        for task in self._tasks:
            task.cancel()
        await self.health.enter_graceful_shutdown()
        doors = [asyncio.ensure_future(door.stop(grace_s)) for door in self.front_doors]  # in parallel
        await self._server.stop(grace_s)
        await asyncio.gather(*doors)

    def stop_soon(self, grace_s: float | None) -> None:
        """Begins stop(grace_s) and returns at once (for signal handlers on the loop)."""
        task = asyncio.get_running_loop().create_task(self.stop(grace_s))
        self._stops.add(task)
        task.add_done_callback(self._stops.discard)

    async def wait_for_termination(self) -> None:
        """Returns once the server has stopped (at once if it never started); frees the engine's
        threads."""
        try:
            if self._tasks:  # grpc's own wait never returns for a server not started
                await self._server.wait_for_termination()
                for door in self.front_doors:
                    await door.wait_closed()
        finally:
            for task in self._tasks:
                task.cancel()
            self.models.close()

    def _on_refused(self, method: str, code: grpc.StatusCode, reason: str) -> None:
        self.metrics.errors.labels(code.name).inc()
        limited_event(logging.INFO, "request_refused", method=method, code=code.name, message=reason)

    def _on_model(self, version: ModelVersion, what: str) -> None:
        """Health per model, ``l3p.v1.Planner/NAME``: SERVING once a version of it is loaded."""
        if what == "loaded":
            self.health.set(f"{SERVICE_NAME}/{version.name}", SERVING)

    def _on_expire(self, session: Session) -> None:
        self.models.release(session.model)
        self.metrics.sessions_expired.inc()
        event(SESSIONS, "session_expired", session=session.id,
              steps=session.planner.step_count, ttl_s=self.store.ttl_s)


def onnxruntime_threads(bundle: Bundle) -> dict[str, int]:
    """The onnxruntime pool sizes the bundle's sessions run with (the largest over them)."""
    options = [graph.get_session_options() for graph in (bundle.actor, bundle.distance, bundle.value)]
    return {
        "onnxruntime_intra_op_threads": max(o.intra_op_num_threads for o in options),
        "onnxruntime_inter_op_threads": max(o.inter_op_num_threads for o in options),
    }


def serve(config: ServeConfig, models: ModelSpec, security: Security, blas: dict[str, int],
          on_ready: Callable[[int], None], *, share_port: bool = False, reloads: Synchronized | None = None,
          **log_fields) -> int:
    """Runs one server process until SIGTERM/SIGINT; calls on_ready(port) once it serves. 0 after
    a shutdown; ServeError if it cannot start (a busy port), BundleError if a model cannot load.
    share_port: a process of ``--processes N``, whose parent holds the port and checked the metrics
    ports; reloads: the ReloadModels counter its processes share."""
    return asyncio.run(_serve(config, models, security, blas, on_ready, share_port, reloads, log_fields))


async def _serve(config: ServeConfig, models: ModelSpec, security: Security, blas: dict[str, int],
                 on_ready: Callable[[int], None], share_port: bool, reloads: Synchronized | None,
                 log_fields: dict) -> int:
    if not share_port:  # refused before the models load
        check_port(config.host, config.port)
        if config.metrics_port:
            check_port(config.metrics_host, config.metrics_port, "--metrics-port")
        if config.openpi_port:
            check_port(config.host, config.openpi_port, "--openpi-port")
    server = PlannerServer(
        models,
        host=config.host,
        port=config.port,
        session_ttl_s=config.session_ttl,
        max_sessions=config.max_sessions,
        max_sessions_per_principal=max_per_principal(config),
        batch_delay_s=config.batch_delay_us * 1e-6,
        credentials=security.credentials,
        gate=security.gate,
        with_reflection=config.reflection,
        replica_id=config.replica_id,
        poll_interval_s=config.poll_interval or None,
        share_port=share_port,
        reloads=reloads,
    )
    await server.open()
    first = server.models.versions()[0].bundle
    event(logging.INFO, "thread_pools", blas_threads=blas, **onnxruntime_threads(first))
    if config.metrics_port:
        try:
            server.metrics.serve_http(config.metrics_port, config.metrics_host, security.metrics_tls,
                                      security.metrics_tokens)
        except OSError as exc:
            await server.stop(None)
            await server.wait_for_termination()
            raise bind_error(config.metrics_host, config.metrics_port, "--metrics-port", exc) from None
    if config.openpi_port is not None:
        from l3p.serving.openpi import open_listener  # websockets: only for a server that speaks it

        try:
            server.front_doors.append(await open_listener(server, config, security, share_port))
        except ServeError:
            await server.stop(None)
            await server.wait_for_termination()
            raise

    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal(sig: signal.Signals) -> None:
        nonlocal signals
        signals += 1
        grace = config.shutdown_grace if signals == 1 else 0  # a second signal: stop now
        event(logging.INFO, "shutting_down", signal=sig.name, grace_s=grace)
        server.stop_soon(grace)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)

    await server.start()
    if config.exit_with_parent is not None:
        exit_with_parent(config.exit_with_parent)
    for host, what in ((config.host, "gRPC"), (config.metrics_host if config.metrics_port else None, "/metrics")):
        if host is not None and security.credentials is None and not is_loopback(host):
            event(logging.WARNING, "insecure", host=host,
                  message=f"{what} in plaintext on a non-loopback address (--insecure): tokens "
                          "and data cross the network unencrypted")
    statuses = server.models.statuses()
    event(logging.INFO, "serving", host=config.host, port=server.port,
          models={s.info.model: {"version": s.info.version, "env_id": s.info.env_id,
                                 "bundle_sha256": s.info.bundle_sha256,
                                 "memory_bytes": s.info.memory_bytes} for s in statuses.models},
          default_model=statuses.default_model, poll_interval_s=config.poll_interval or None,
          metrics_port=config.metrics_port or None, metrics_host=config.metrics_host,
          metrics_token=security.metrics_tokens is not None, session_ttl_s=config.session_ttl,
          max_sessions=config.max_sessions,
          max_sessions_per_principal=server.store.per_principal,
          batch_delay_us=config.batch_delay_us, max_message_bytes=MAX_MESSAGE_BYTES,
          tls=security.credentials is not None, mutual_tls=config.tls_client_ca is not None,
          tokens=config.auth_token_file is not None, admin=config.admin_token_file is not None,
          reflection=config.reflection, replica_id=config.replica_id,
          openpi_port=server.front_doors[0].port if server.front_doors else None, **log_fields)
    if server.front_doors and not share_port:  # with --processes N the parent reports the port
        print(f"L3P_OPENPI_READY port={server.front_doors[0].port}", flush=True)
    on_ready(server.port)
    await server.wait_for_termination()
    # grpc's tasks for the last calls may still be sending their final status: let them end
    # before asyncio.run cancels whatever is left (a cancelled send logs an unhandled error).
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait(others, timeout=1.0)
    event(logging.INFO, "stopped", live_sessions=len(server.store))
    return 0


def max_per_principal(config: ServeConfig) -> int | None:
    """--max-sessions-per-principal; by default, when callers authenticate (tokens or client
    certificates), a quarter of --max-sessions, so no one caller can take every session; without
    authentication every caller is one principal and only --max-sessions applies."""
    if config.max_sessions_per_principal is not None:
        return config.max_sessions_per_principal
    if config.auth_token_file is None and config.tls_client_ca is None:
        return None
    return max(1, config.max_sessions // DEFAULT_PRINCIPAL_SHARE)
