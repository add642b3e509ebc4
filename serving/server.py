"""The L3P planner gRPC server: one loaded bundle shared by many isolated episodes.

    python -m serving.server --bundle DIR --port 0     # or: l3p serve --bundle DIR ...

An asyncio server (grpc.aio): a call or an open Control stream costs no thread. Every episode is
a session holding its own `EpisodePlanner` (core/episode.py) behind its own lock; the CPU work
(onnxruntime, graph solves) runs off the event loop, and the steps of different sessions that
wait at the same time share one onnxruntime call per network (serving/batching.py; results are
the same as unbatched). The process caps BLAS at one thread itself (serving/threads.py) and logs
its pool sizes at start. Sessions, unary or stream, expire after --session-ttl seconds without a
call. Requests over 64 KiB are refused with RESOURCE_EXHAUSTED (ours are ~100 bytes; see
MAX_MESSAGE_BYTES). Once listening, the server prints `L3P_SERVER_READY port=<N>` on stdout;
logs are JSON lines on stderr. SIGTERM/SIGINT: health goes NOT_SERVING (health watches end),
new calls are refused, calls in flight get --shutdown-grace seconds to finish.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.engine import Engine
from l3p.serving.bundle import Bundle, BundleError, load_bundle
from l3p.serving.health import SERVING, HealthService
from l3p.serving.health import SERVICE_NAME as HEALTH_SERVICE_NAME
from l3p.serving.metrics import Metrics
from l3p.serving.security import (
    AuthInterceptor,
    Gatekeeper,
    Security,
    SecurityConfigError,
    add_security_arguments,
    is_loopback,
    security_from_args,
)
from l3p.serving.sessions import Owner, Session, SessionLimitError, SessionNotFoundError, SessionStore
from l3p.serving.threads import limit_blas_threads

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Planner"].full_name  # "l3p.v1.Planner"

# Requests are ~100 bytes; a small cap bounds the memory one call can make the server hold.
# gRPC itself answers RESOURCE_EXHAUSTED ("Received message larger than max") past it.
MAX_MESSAGE_BYTES = 64 * 1024

# A StartEpisode solved with less time than this left before its deadline is not answered: the
# answer would likely arrive late, and the client would never learn the session's id.
DELIVERY_MARGIN_S = 0.002

# StartEpisodeResponse.landmark_to_goal for a landmark the goal cannot be reached from
# (documented in the .proto; a float field has no portable infinity for every client).
UNREACHABLE = -1.0

_MODES = {pb.PLANNER_MODE_L3P: "l3p", pb.PLANNER_MODE_NAIVE: "naive", pb.PLANNER_MODE_POLICY: "policy"}
_SEARCHES = {pb.SEARCH_KIND_SOFT: "soft", pb.SEARCH_KIND_HARD: "hard", pb.SEARCH_KIND_EXPECTATION: "expectation"}
_MODE_ENUM = {name: value for value, name in _MODES.items()}
_SEARCH_ENUM = {name: value for value, name in _SEARCHES.items()}

# Max queue delay of the cross-session batcher (--batch-delay-us), chosen with
# benchmarks/serve_latency.py: see README's serving table.
DEFAULT_BATCH_DELAY_US = 0

log = logging.getLogger("l3p.serving")


class InvalidRequestError(ValueError):
    pass


class StreamOrderError(RuntimeError):
    pass


class DeadlineError(RuntimeError):
    pass


# The application's error model: each expected failure maps to one status code. Anything else
# is a bug and is answered INTERNAL with a short message (never UNKNOWN, never a traceback).
_STATUS_OF = (
    (InvalidRequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (SessionNotFoundError, grpc.StatusCode.NOT_FOUND),
    (StreamOrderError, grpc.StatusCode.FAILED_PRECONDITION),
    (SessionLimitError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (DeadlineError, grpc.StatusCode.DEADLINE_EXCEEDED),
)


def _event(level: int, event: str, exc_info: BaseException | None = None, **fields) -> None:
    # The record is made here, not by log.log(), which walks the stack for a file and line the
    # JSON lines do not carry: a saving on every session start and end.
    if log.isEnabledFor(level):
        if exc_info is not None:
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        log.handle(log.makeRecord(log.name, level, "", 0, event, None, exc_info,
                                  extra={"fields": fields}))


class Malformed:
    """A request body that does not parse as its message type. Our deserializers return it
    instead of raising, so the handler answers INVALID_ARGUMENT (gRPC itself would answer
    INTERNAL and log an error-level traceback)."""

    def __init__(self, message_type, error: Exception):
        self.message = (
            f"the request body is not a valid {message_type.DESCRIPTOR.full_name} message "
            f"({error}); build it with stubs generated from protos/l3p_planner.proto"
        )


def _parser(message_type):
    def parse(data: bytes):
        try:
            return message_type.FromString(data)
        except (DecodeError, ValueError, RuntimeError) as exc:
            return Malformed(message_type, exc)

    return parse


def _checked(request):
    if isinstance(request, Malformed):
        raise InvalidRequestError(request.message)
    return request


def _answers_errors(handler):
    """Turns a unary handler's exceptions into the error model's status codes."""

    @functools.wraps(handler)
    async def wrapper(self, request, context):
        try:
            return await handler(self, _checked(request), context)
        except Exception as exc:
            await self._abort(context, exc, handler.__name__)

    return wrapper


def _anonymous(context: grpc.aio.ServicerContext) -> str:
    return ""


class PlannerServicer(pb_grpc.PlannerServicer):
    def __init__(self, bundle: Bundle, store: SessionStore, metrics: Metrics, engine: Engine,
                 principal: Callable[[grpc.aio.ServicerContext], str] = _anonymous):
        self._bundle = bundle
        self._principal = principal  # who is calling: the owner of the sessions it opens
        self._store = store
        self._metrics = metrics
        self._engine = engine
        self._model_info = model_info(bundle)

    @_answers_errors
    async def GetModelInfo(self, request, context):
        return self._model_info

    @_answers_errors
    async def StartEpisode(self, request, context):
        # A start whose deadline passes while it is solved must not leave a session nobody knows
        # the id of. gRPC lets the handler run on past the deadline, so one that finishes with
        # under DELIVERY_MARGIN_S left (or none) drops its session and answers so.
        session, response = await self._start(request, Owner(self._principal(context)))
        remaining = context.time_remaining()
        if remaining is not None and remaining < DELIVERY_MARGIN_S:
            self._discard(session.id, "deadline_passed")
            raise DeadlineError(
                "the episode was solved too close to the call's deadline to answer; no session "
                "was kept: retry with a longer deadline"
            )
        return response

    @_answers_errors
    async def Act(self, request, context):
        session = self._store.get(request.session_id, Owner(self._principal(context)))
        return await self._act(session, request.observation)

    @_answers_errors
    async def EndEpisode(self, request, context):
        session = self._store.pop(request.session_id, Owner(self._principal(context)))
        async with session.lock:  # a step still in flight is counted
            planner = session.planner
            steps, replans = planner.step_count, planner.replans
        _event(logging.INFO, "session_ended", session=session.id, steps=steps, replans=replans,
               reason="end_episode")
        return pb.EndEpisodeResponse(steps=steps, replans=replans)

    async def Control(self, request_iterator, context):
        session = None
        try:
            async for request in request_iterator:
                kind = _checked(request).WhichOneof("msg")
                if kind == "start":
                    if session is not None:
                        raise StreamOrderError(
                            "a second 'start' on this Control stream: one stream carries one "
                            "episode; open a new stream for the next"
                        )
                    # Owned by this stream: no unary call can reach it.
                    session, started = await self._start(
                        request.start, Owner.of_stream(self._principal(context)))
                    yield pb.ControlResponse(started=started)
                elif kind == "observation":
                    if session is None:
                        raise StreamOrderError(
                            "'observation' before 'start': the first message on a Control "
                            "stream must be 'start' carrying the goal"
                        )
                    # Through the store, as Act: marks the session used (only idleness expires
                    # it), and an episode that idled past the TTL answers NOT_FOUND.
                    live = self._store.get(session.id, session.owner)
                    action = await self._act(live, request.observation.observation)
                    yield pb.ControlResponse(action=action)
                else:
                    raise InvalidRequestError(
                        "ControlRequest has no message: set 'start' or 'observation'"
                    )
        except Exception as exc:
            if not context.done():  # else the client is gone and nobody reads an answer
                await self._abort(context, exc, "Control")
        finally:  # the stream ended for whatever reason: completion, error, client gone
            if session is not None:
                self._discard(session.id, "stream_closed")

    # -- the work shared by unary calls and the stream

    async def _start(self, request: pb.StartEpisodeRequest,
                     owner: Owner) -> tuple[Session, pb.StartEpisodeResponse]:
        bundle = self._bundle
        goal = self._vector(request.goal, "goal", bundle.goal_dim, "goal_dim")
        config, seed = self._episode_config(request.options)
        self._store.check_capacity()  # before the graph solve, the costly part of a start
        planner = await self._engine.start_episode(goal, config, seed)
        session = self._store.add(planner, owner)
        self._metrics.sessions_started.inc()
        _event(logging.INFO, "session_started", session=session.id, owner=owner.principal,
               stream=owner.stream is not None, mode=config.mode,
               search=config.search, seed=seed, live=len(self._store))
        to_goal = planner.landmark_to_goal
        return session, pb.StartEpisodeResponse(
            session_id=session.id,
            n_landmarks=bundle.n_landmarks,
            landmark_to_goal=np.where(np.isfinite(to_goal), to_goal, UNREACHABLE).tolist(),
        )

    async def _act(self, session: Session, observation) -> pb.ActResponse:
        started = time.perf_counter()
        obs = self._vector(observation, "observation", self._bundle.obs_dim, "obs_dim")
        async with session.lock:
            planner = session.planner
            step = planner.step_count
            need = planner.prepare(obs)
            result = planner.complete(await self._engine.infer(need))
        bundle = self._bundle
        response = pb.ActResponse(
            # Within the bundle's bounds: the actor's tanh output scaled in float32 can overshoot
            # by an ulp (-1.0000001 seen for a +-1 box).
            action=np.clip(result.action, bundle.action_low, bundle.action_high).tolist(),
            subgoal=result.subgoal.tolist(),  # lists convert to repeated fields 2x faster
            subgoal_index=result.subgoal_index,
            replanned=result.replanned,
            counter=result.counter,
            step=step,
            estimated_distance=result.estimated_distance,
        )
        self._metrics.steps.inc()
        if result.replanned:
            self._metrics.replans.inc()
        self._metrics.step_latency[result.replanned].observe(time.perf_counter() - started)
        return response

    def _discard(self, session_id: str, reason: str) -> None:
        session = self._store.discard(session_id)
        if session is not None:  # else EndEpisode or the TTL removed it first
            _event(logging.INFO, "session_ended", session=session.id,
                   steps=session.planner.step_count, replans=session.planner.replans,
                   reason=reason)

    def _vector(self, values, field: str, dim: int, dim_name: str) -> np.ndarray:
        if len(values) != dim:
            raise InvalidRequestError(
                f"{field} has {len(values)} values, expected {dim} "
                f"({dim_name} of {self._bundle.env_id})"
            )
        vector = np.fromiter(values, np.float32, dim)
        if not np.isfinite(vector).all():
            bad = np.flatnonzero(~np.isfinite(vector))
            raise InvalidRequestError(
                f"{field}[{bad[0]}] is {vector[bad[0]]}, expected a finite number "
                f"({bad.size} of {dim} values are NaN or Inf)"
            )
        return vector

    def _episode_config(self, options: pb.EpisodeOptions):
        if not options.ListFields():  # nothing set: the bundle's defaults, validated at load
            return self._bundle.planner_defaults, None
        overrides = {}
        enums = (("mode", _MODES, pb.PlannerMode), ("search", _SEARCHES, pb.SearchKind))
        for field, names, enum in enums:
            value = getattr(options, field)
            if value in names:
                overrides[field] = names[value]
            elif value != 0:  # 0 = unspecified: the bundle's default
                expected = ", ".join(enum.Name(v) for v in names)
                raise InvalidRequestError(
                    f"options.{field} is {value}, not a known {enum.DESCRIPTOR.name}; "
                    f"expected one of {expected} (or unset for the bundle's default)"
                )
        for field in ("d_max", "temperature", "local_horizon", "sample_subgoal", "prune_failed"):
            if options.HasField(field):
                overrides[field] = getattr(options, field)
        try:
            config = self._bundle.planner_defaults.replace(**overrides)
        except ValueError as exc:
            raise InvalidRequestError(f"options.{exc}") from None
        return config, (options.seed if options.HasField("seed") else None)

    async def _abort(self, context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
        code = next((code for kind, code in _STATUS_OF if isinstance(exc, kind)), None)
        if code is None:
            _event(logging.ERROR, "internal_error", method=method, error=repr(exc), exc_info=exc)
            code, message = grpc.StatusCode.INTERNAL, f"internal error in {method}; see server log"
        else:
            message = str(exc)
            _event(logging.INFO, "request_error", method=method, code=code.name, message=message)
        self._metrics.errors.labels(code.name).inc()
        try:
            await context.abort(code, message)
        except grpc.aio.AbortError:
            raise  # the status is sent: how a handler ends
        except Exception:
            # The call ended (deadline passed, client gone) before the status could be sent:
            # nobody to answer; end the handler as a cancelled call, not a server error.
            raise asyncio.CancelledError() from None


def planner_handlers(servicer: PlannerServicer) -> dict[str, grpc.RpcMethodHandler]:
    """The Planner service's method handlers, with request parsers that never raise (Malformed)."""
    unary = {
        "GetModelInfo": (pb.GetModelInfoRequest, pb.ModelInfo),
        "StartEpisode": (pb.StartEpisodeRequest, pb.StartEpisodeResponse),
        "Act": (pb.ActRequest, pb.ActResponse),
        "EndEpisode": (pb.EndEpisodeRequest, pb.EndEpisodeResponse),
    }
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name),
            request_deserializer=_parser(request),
            response_serializer=response.SerializeToString,
        )
        for name, (request, response) in unary.items()
    }
    handlers["Control"] = grpc.stream_stream_rpc_method_handler(
        servicer.Control,
        request_deserializer=_parser(pb.ControlRequest),
        response_serializer=pb.ControlResponse.SerializeToString,
    )
    return handlers


def model_info(bundle: Bundle) -> pb.ModelInfo:
    defaults = bundle.planner_defaults
    return pb.ModelInfo(
        env_id=bundle.env_id,
        obs_dim=bundle.obs_dim,
        goal_dim=bundle.goal_dim,
        action_dim=bundle.action_dim,
        action_low=bundle.action_low,
        action_high=bundle.action_high,
        n_landmarks=bundle.n_landmarks,
        format_version=bundle.manifest["format_version"],
        bundle_sha256=bundle.sha256,
        gamma=bundle.gamma,
        defaults=pb.PlannerDefaults(
            n_landmarks=bundle.n_landmarks,
            d_max=defaults.d_max,
            temperature=defaults.temperature,
            search=_SEARCH_ENUM[defaults.search],
            search_iterations=defaults.search_iterations,
            local_horizon=defaults.local_horizon,
            mode=_MODE_ENUM[defaults.mode],
            prune_failed=defaults.prune_failed,
        ),
        provenance_json=json.dumps(bundle.manifest.get("provenance", {})),
    )


def onnxruntime_threads(bundle: Bundle) -> dict[str, int]:
    """The onnxruntime pool sizes the bundle's sessions run with (the largest over them)."""
    options = [graph.get_session_options() for graph in (bundle.actor, bundle.distance, bundle.value)]
    return {
        "onnxruntime_intra_op_threads": max(o.intra_op_num_threads for o in options),
        "onnxruntime_inter_op_threads": max(o.inter_op_num_threads for o in options),
    }


class PlannerServer:
    """The asyncio gRPC server (planner, health, optionally reflection) and the TTL reaper, run on
    an event loop of its own thread, so callers (the command line, tests) drive it synchronously.

    ``credentials``: TLS for the port (plaintext when None). ``gate``: token checks and caller
    identities (serving/security.py); None admits everyone as one anonymous principal.
    ``replica_id``: prefixes session ids ("ID.") so a proxy can route a session's calls here.
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
        self.engine = Engine(bundle, max_delay_s=batch_delay_s, metrics=self.metrics)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="l3p-grpc", daemon=True)
        self._thread.start()
        self._stopped = threading.Event()
        self._stopping: asyncio.Task | None = None
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            self.port = self._run(self._create(address, credentials, gate, with_reflection))
        except BaseException:
            self._close_loop()
            raise
        self._reaper_stop = threading.Event()
        self._reaper = threading.Thread(
            target=self.store.run_reaper,
            args=(self._reaper_stop, min(1.0, session_ttl_s / 2)),
            name="l3p-session-reaper",
            daemon=True,
        )

    async def _create(self, address: str, credentials: grpc.ServerCredentials | None,
                      gate: Gatekeeper | None, with_reflection: bool) -> int:
        self.health = HealthService()
        interceptors = []
        if gate is not None and gate.tokens is not None:
            interceptors.append(AuthInterceptor(gate, SERVICE_NAME, self._on_refused))
        self._server = grpc.aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                # Ping idle connections so a robot that vanished without closing its stream is
                # noticed, its call cancelled and its session freed.
                ("grpc.keepalive_time_ms", 60_000),
                ("grpc.keepalive_timeout_ms", 20_000),
                # Accept client keepalive pings down to 10 s instead of answering GOAWAY.
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
                ("grpc.keepalive_permit_without_calls", 1),
            ],
        )
        self.servicer = PlannerServicer(self.bundle, self.store, self.metrics, self.engine,
                                        gate.principal if gate is not None else _anonymous)
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
        # RuntimeError if it cannot bind
        if credentials is None:
            return self._server.add_insecure_port(address)
        return self._server.add_secure_port(address, credentials)

    def start(self) -> None:
        self._run(self._start())
        self._reaper.start()

    async def _start(self) -> None:
        await self._server.start()
        for service in ("", SERVICE_NAME):  # "" is the server as a whole
            self.health.set(service, SERVING)

    def stop(self, grace_s: float | None) -> None:
        """Health NOT_SERVING, refuse new calls, give calls in flight grace_s to finish.

        Returns at once (safe from a signal handler); wait_for_termination() returns when the
        server has stopped. A second call with a smaller grace stops sooner (gRPC semantics)."""
        self._loop.call_soon_threadsafe(self._begin_stop, grace_s)
        self._reaper_stop.set()

    def _begin_stop(self, grace_s: float | None) -> None:
        stopping = self._loop.create_task(self._stop(grace_s))
        if self._stopping is None:
            self._stopping = stopping
            stopping.add_done_callback(lambda _: self._stopped.set())

    async def _stop(self, grace_s: float | None) -> None:
        await self.health.enter_graceful_shutdown()
        await self._server.stop(grace_s)

    def wait_for_termination(self) -> None:
        # Waits in short slices, so signal handlers run promptly in the main thread.
        while not self._stopped.wait(0.2):
            pass
        self._close_loop()

    def _close_loop(self) -> None:
        self.engine.close()
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _on_refused(self, method: str, reason: str) -> None:
        self.metrics.errors.labels(grpc.StatusCode.UNAUTHENTICATED.name).inc()
        _event(logging.INFO, "request_refused", method=method, code="UNAUTHENTICATED", message=reason)

    def _on_expire(self, session: Session) -> None:
        self.metrics.sessions_expired.inc()
        _event(logging.INFO, "session_expired", session=session.id,
               steps=session.planner.step_count, ttl_s=self.store.ttl_s)


# -- command line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, pid, event, then the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
            .isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,  # tells apart the processes of --processes N
            "event": record.getMessage(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    # Records need no thread or process names (JsonFormatter writes the pid only).
    logging.logThreads = logging.logMultiprocessing = False
    # The root logger, so grpc's own messages are JSON lines too.
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port in [0, 65535], got {text}")
    return value


def _microseconds(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"expected microseconds in [0, 1000000], got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text}")
    return value


def _sha256(text: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
        raise argparse.ArgumentTypeError(f"expected 64 hex digits, got {text!r}")
    return text.lower()


def _replica_id(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9-]{1,32}", text):
        raise argparse.ArgumentTypeError(f"expected 1-32 of A-Z a-z 0-9 -, got {text!r}")
    return text


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bundle", type=Path, required=True, help="model bundle directory")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; 0.0.0.0 exposes the server)")
    parser.add_argument("--port", type=_port, default=50051,
                        help="gRPC port (default 50051; 0 picks a free one, printed as "
                             "'L3P_SERVER_READY port=N')")
    parser.add_argument("--session-ttl", type=_seconds, default=300.0,
                        help="seconds an idle episode is kept (default 300)")
    parser.add_argument("--max-sessions", type=_count, default=1024,
                        help="live episodes at most; more answer RESOURCE_EXHAUSTED (default 1024)")
    parser.add_argument("--batch-delay-us", type=_microseconds, default=DEFAULT_BATCH_DELAY_US,
                        help="max queue delay: how long the first step of a batch waits for the "
                             "steps of other sessions to share its onnxruntime call (default "
                             f"{DEFAULT_BATCH_DELAY_US}; steps that arrive while a call runs are "
                             "batched whatever this is)")
    parser.add_argument("--shutdown-grace", type=_seconds, default=10.0,
                        help="seconds calls in flight may take to finish on SIGTERM (default 10)")
    parser.add_argument("--log-level", default="info",
                        choices=("debug", "info", "warning", "error"), help="default info")
    parser.add_argument("--exit-with-parent", type=int, metavar="PID", default=None,
                        help="shut down (as on SIGTERM) when process PID, the supervisor that "
                             "started this server, exits (Linux)")
    parser.add_argument("--metrics-port", type=_port, default=0,
                        help="serve Prometheus metrics at http://HOST:PORT/metrics (default 0: off; "
                             "with --processes N, process i serves PORT+i)")
    add_security_arguments(parser)
    parser.add_argument("--reflection", action="store_true",
                        help="serve gRPC server reflection (lists the services; off by default)")
    parser.add_argument("--bundle-sha256", metavar="HEX", type=_sha256,
                        help="refuse to start unless the bundle's digest (printed by l3p export, "
                             "reported by GetModelInfo) is HEX")
    parser.add_argument("--processes", type=_count, default=1,
                        help="server processes sharing the port (SO_REUSEPORT; default 1); each "
                             "client connection, with its sessions, stays on one process")
    parser.add_argument("--replica-id", type=_replica_id, metavar="ID",
                        help="prefix session ids with 'ID.' so a proxy can send a session's unary "
                             "calls to this replica (deploy/nginx)")


def operator_error(message: str) -> int:
    """An operator's error (bad bundle or option, busy port): one line, no traceback."""
    print(f"l3p serve: error: {message}", file=sys.stderr, flush=True)
    return 2


def check_pin(bundle: Bundle, expected: str | None) -> None:
    if expected is not None and bundle.sha256 != expected.lower():
        raise BundleError(
            f"bundle {bundle.path} has digest {bundle.sha256}, not the pinned --bundle-sha256 "
            f"{expected}; refusing to serve it")


def prepare(args: argparse.Namespace) -> tuple[Bundle, Security, int]:
    """The checked bundle, the security settings and the BLAS pool size, or BundleError /
    SecurityConfigError."""
    blas = limit_blas_threads(1)  # before any BLAS work (the bundle's graph solve)
    security = security_from_args(args)
    bundle = load_bundle(args.bundle)
    check_pin(bundle, args.bundle_sha256)
    return bundle, security, blas


def run_serve(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        prepared = prepare(args)
    except (BundleError, SecurityConfigError) as exc:
        return operator_error(str(exc))
    if args.processes > 1:
        from l3p.serving.processes import run_processes

        return run_processes(args)
    return serve(args, *prepared,
                 on_ready=lambda port: print(f"L3P_SERVER_READY port={port}", flush=True))


def serve(args: argparse.Namespace, bundle: Bundle, security: Security, blas: int,
          on_ready: Callable[[int], None], **log_fields) -> int:
    """Runs one server process until SIGTERM/SIGINT; calls on_ready(port) once it serves."""
    _event(logging.INFO, "thread_pools", blas_threads=blas, **onnxruntime_threads(bundle))
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
        if args.metrics_port:
            server.metrics.serve_http(args.metrics_port, args.host)
    except RuntimeError as exc:  # grpc raises RuntimeError when it cannot bind
        return operator_error(str(exc))
    except OSError as exc:
        return operator_error(f"metrics port {args.metrics_port}: {exc.strerror}")

    signals = 0

    def on_signal(signum, frame):
        nonlocal signals
        signals += 1
        grace = args.shutdown_grace if signals == 1 else 0  # a second signal: stop now
        _event(logging.INFO, "shutting_down", signal=signal.Signals(signum).name, grace_s=grace)
        server.stop(grace)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)

    server.start()
    if args.exit_with_parent is not None:
        exit_with_parent(args.exit_with_parent)
    if security.credentials is None and not is_loopback(args.host):
        _event(logging.WARNING, "insecure", host=args.host,
               message="plaintext on a non-loopback address (--insecure): tokens and "
                       "observations cross the network unencrypted")
    _event(logging.INFO, "serving", host=args.host, port=server.port, env_id=bundle.env_id,
           bundle=str(args.bundle), bundle_sha256=bundle.sha256, n_landmarks=bundle.n_landmarks,
           metrics_port=args.metrics_port or None, session_ttl_s=args.session_ttl,
           max_sessions=args.max_sessions, batch_delay_us=args.batch_delay_us,
           max_message_bytes=MAX_MESSAGE_BYTES, tls=security.credentials is not None,
           mutual_tls=args.tls_client_ca is not None, tokens=args.auth_token_file is not None,
           reflection=args.reflection, replica_id=args.replica_id, **log_fields)
    on_ready(server.port)
    server.wait_for_termination()
    _event(logging.INFO, "stopped", live_sessions=len(server.store))
    return 0


def exit_with_parent(pid: int) -> None:
    """Ask the kernel for SIGTERM when our parent dies (PR_SET_PDEATHSIG); if it is already gone
    (we were re-parented before asking), shut down now."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != pid:
        signal.raise_signal(signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.server", description=__doc__.split("\n")[0])
    add_serve_arguments(parser)
    return run_serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
