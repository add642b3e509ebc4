"""A small client for the L3P planning service: grpcio + protobuf + numpy, nothing else.

One robot episode is one server-side session. The episode context manager always ends the
session, even when the control loop raises::

    import numpy as np
    from l3p.clients.client import PlannerClient, PlannerError, Unavailable

    with PlannerClient("planner-host:50051", timeout_s=0.5) as client:
        info = client.model_info()                   # env id, dims, landmark count, ...
        goal = np.array([1.3, 0.7, 0.42])            # goal_dim floats
        with client.episode(goal, mode="l3p", seed=1) as ep:
            while not robot.done():
                try:
                    step = ep.act(robot.observation())   # obs_dim floats
                except Unavailable:
                    robot.hold()                     # Act is never retried: re-observe, decide
                    raise
                robot.apply(step.action)             # step.subgoal: where the planner heads now

The same episode over one bidirectional stream (lower per-step latency; the session ends with
the stream)::

        with client.stream_episode(goal, mode="l3p") as ep:
            step = ep.act(obs)

Errors are typed (``InvalidArgument``, ``NotFound``, ``FailedPrecondition``,
``ResourceExhausted``, ``Unavailable``, ``DeadlineExceeded``, ``Unauthenticated``; all
``PlannerError``) and carry the server's message in ``.message`` and the gRPC status in ``.code``.

A server with TLS and tokens (``l3p serve --tls-cert ... --auth-token-file ...``)::

    creds = channel_credentials(ca="ca.crt")         # + cert=, key= for mutual TLS
    client = PlannerClient("planner:443", credentials=creds, token=read_token("robot.token"))

Resume (opt-in, ``episode(goal, resume=True)``, same for streams): when the server that holds the
episode is gone (UNAVAILABLE, NOT_FOUND after a restart lost it, or a call cancelled or reset as
it went down), ``act`` starts a new episode with the same goal and options on whichever server
answers, and sends it the same observation: the robot gets its action, the planner re-plans once
(the new session's first step), and ``step.resumed`` / ``ep.resumes`` say it happened. The lost
session, if its server still runs unreachable, is freed by that server's idle TTL.

Retries: ``GetModelInfo``, ``StartEpisode`` and ``EndEpisode`` are retried on UNAVAILABLE (and
CANCELLED: how a stopping server answers a call that reaches it) with exponential backoff and
jitter (:class:`RetryPolicy`), and so is the opening of a ``Control`` stream until its
``started`` reply (also when a proxy resets it): a stream that fails before it started leaves
no session. ``Act`` and the stream's observations are NOT retried: an Act that
reached the server before the connection broke has already advanced the episode's planner state
(step index, re-plan counter), so a retry would step twice; and after a backoff the observation
is stale anyway. The control loop should send a fresh observation (or stop the robot) instead.
A retried ``StartEpisode`` whose first attempt did reach the server leaves at most one orphan
session, which the server's idle TTL frees.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np

from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc

__all__ = [
    "PlannerClient",
    "Episode",
    "StreamEpisode",
    "Step",
    "EpisodeSummary",
    "ModelInfo",
    "RetryPolicy",
    "PlannerError",
    "InvalidArgument",
    "NotFound",
    "FailedPrecondition",
    "ResourceExhausted",
    "Unavailable",
    "DeadlineExceeded",
    "Unauthenticated",
    "MODES",
    "channel_credentials",
    "read_token",
]

log = logging.getLogger(__name__)

MODES: dict[str, int] = {
    "l3p": pb.PLANNER_MODE_L3P,
    "naive": pb.PLANNER_MODE_NAIVE,
    "policy": pb.PLANNER_MODE_POLICY,
}
SEARCHES: dict[str, int] = {"soft": pb.SEARCH_KIND_SOFT, "hard": pb.SEARCH_KIND_HARD,
                            "expectation": pb.SEARCH_KIND_EXPECTATION}
_MODE_NAMES = {v: k for k, v in MODES.items()}
_SEARCH_NAMES = {v: k for k, v in SEARCHES.items()}

_T = TypeVar("_T")


# --------------------------------------------------------------------------- errors


class PlannerError(Exception):
    """A failed planner call: ``code`` is the gRPC status, ``message`` the server's text."""

    def __init__(self, code: grpc.StatusCode, message: str, method: str = "") -> None:
        self.code = code
        self.message = message
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {message}")


class InvalidArgument(PlannerError):
    """Wrong length, NaN/Inf or a bad option; fix the request."""


class NotFound(PlannerError):
    """Unknown, ended or expired session."""


class FailedPrecondition(PlannerError):
    """Out-of-order use, e.g. an observation before the goal on a stream."""


class ResourceExhausted(PlannerError):
    """The server's session (or concurrency) limit is reached."""


class Unavailable(PlannerError):
    """The server cannot be reached (down, restarting, network)."""


class DeadlineExceeded(PlannerError):
    """No answer within the call's deadline."""


class Unauthenticated(PlannerError):
    """The server wants a bearer token (``token=``) and got none or a wrong one."""


_ERRORS: dict[grpc.StatusCode, type[PlannerError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
}

# Failures after which a call that may be repeated (not Act) is: the server cannot be reached, or
# cancelled the call as it was stopping (a blocking unary call is never cancelled by this client).
_RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED})

# Failures after which an episode's session is gone or out of reach, so a new session can carry
# on (resume=True): the server cannot be reached (UNAVAILABLE), no longer holds the session after a
# restart (NOT_FOUND), cancelled the call while stopping (CANCELLED), or a proxy reset the call
# when the replica behind it died (INTERNAL, UNKNOWN). Resuming abandons the old session, so a
# call that did reach it before failing is never applied twice. Not among them: the caller's
# own errors and DEADLINE_EXCEEDED (a slow server may still answer the next call).
_LOST = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.CANCELLED,
                   grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})


def _translate(err: grpc.RpcError, method: str) -> PlannerError:
    """The typed error for a failed call (grpc's sync errors are also ``grpc.Call``)."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    code = code or grpc.StatusCode.UNKNOWN
    return _ERRORS.get(code, PlannerError)(code, details or "", method)


# --------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class Step:
    """One planner step: the action to apply and why it was chosen."""

    action: np.ndarray  # [action_dim] float32, within the model's action bounds
    subgoal: np.ndarray  # [goal_dim] the goal pursued this step (a landmark or the final goal)
    subgoal_index: int  # landmark index, or -1 for the final goal
    replanned: bool  # this step ran the graph search
    counter: int  # steps left before the next re-plan
    step: int  # 0-based step index within the episode (server's count)
    estimated_distance: float = 0.0  # D(obs, subgoal) in steps when re-planned, else 0
    latency_s: float = 0.0  # round trip measured by this client
    resumed: bool = False  # answered by a new session after the episode's server was lost

    @classmethod
    def from_proto(cls, r: pb.ActResponse, latency_s: float = 0.0) -> Step:
        return cls(
            action=np.array(r.action, dtype=np.float32),
            subgoal=np.array(r.subgoal, dtype=np.float32),
            subgoal_index=int(r.subgoal_index),
            replanned=bool(r.replanned),
            counter=int(r.counter),
            step=int(r.step),
            estimated_distance=float(r.estimated_distance),
            latency_s=latency_s,
        )


def _resume_or_raise(episode: "Episode | StreamEpisode", lost: PlannerError, message: str) -> None:
    """After a failed step: re-raise unless the episode resumes and the server was lost; else
    open a new session (same goal and options) for the step to be retried on."""
    if not (episode.resume and lost.code in _LOST):
        raise lost
    log.warning(message, episode.session_id, lost)
    episode._open()
    episode.resumes += 1


@dataclasses.dataclass(frozen=True)
class EpisodeSummary:
    steps: int
    replans: int


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What the server is serving (``GetModelInfo``), with enums as names."""

    env_id: str
    obs_dim: int
    goal_dim: int
    action_dim: int
    action_low: np.ndarray
    action_high: np.ndarray
    n_landmarks: int
    format_version: int
    bundle_sha256: str
    gamma: float
    defaults: dict[str, Any]
    provenance: dict[str, Any]

    @classmethod
    def from_proto(cls, m: pb.ModelInfo) -> ModelInfo:
        d = m.defaults
        defaults = {
            "n_landmarks": d.n_landmarks,
            "d_max": d.d_max,
            "temperature": d.temperature,
            "search": _SEARCH_NAMES.get(d.search, "unspecified"),
            "search_iterations": d.search_iterations,
            "local_horizon": d.local_horizon,
            "mode": _MODE_NAMES.get(d.mode, "unspecified"),
        }
        try:
            provenance = json.loads(m.provenance_json) if m.provenance_json else {}
        except json.JSONDecodeError:  # informative only; never fail a client over it
            provenance = {"raw": m.provenance_json}
        return cls(
            env_id=m.env_id,
            obs_dim=m.obs_dim,
            goal_dim=m.goal_dim,
            action_dim=m.action_dim,
            action_low=np.array(m.action_low, dtype=np.float32),
            action_high=np.array(m.action_high, dtype=np.float32),
            n_landmarks=m.n_landmarks,
            format_version=m.format_version,
            bundle_sha256=m.bundle_sha256,
            gamma=m.gamma,
            defaults=defaults,
            provenance=provenance,
        )


# --------------------------------------------------------------------------- retry


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for UNAVAILABLE (or CANCELLED) on idempotent calls.

    The wait before retry k (k = 1, 2, ...) is drawn uniformly from [cap/2, cap] with
    cap = min(max_backoff_s, initial_backoff_s * multiplier**(k-1)): half fixed so a restart
    gets time, half random so many robots reconnecting at once spread out. The defaults wait
    about 6-12 s in total, enough for a server restart.
    """

    max_attempts: int = 8  # total tries, the first included; 1 = no retry
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 3.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_backoff_s < 0 or self.max_backoff_s < 0 or self.multiplier < 1:
            raise ValueError("backoffs must be >= 0 and multiplier >= 1")

    def backoff_s(self, retry: int, rng: random.Random) -> float:
        cap = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (retry - 1))
        return rng.uniform(cap / 2, cap)


NO_RETRY = RetryPolicy(max_attempts=1)


# --------------------------------------------------------------------------- client


def _floats(x: Any, what: str) -> list[float]:
    """A flat list of floats for a repeated-float field (values are checked by the server)."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim > 1 and arr.size != arr.shape[-1]:
        raise ValueError(f"{what} must be one vector, got shape {arr.shape}")
    return arr.ravel().tolist()


def episode_options(
    mode: str | None = None,
    *,
    seed: int | None = None,
    d_max: float | None = None,
    temperature: float | None = None,
    search: str | None = None,
    local_horizon: float | None = None,
    sample_subgoal: bool | None = None,
    prune_failed: bool | None = None,
) -> pb.EpisodeOptions:
    """``EpisodeOptions`` from plain values; ``None`` means the bundle's default."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    if search is not None and search not in SEARCHES:
        raise ValueError(f"search must be one of {sorted(SEARCHES)}, got {search!r}")
    opts = pb.EpisodeOptions(
        mode=MODES[mode] if mode else pb.PLANNER_MODE_UNSPECIFIED,
        search=SEARCHES[search] if search else pb.SEARCH_KIND_UNSPECIFIED,
    )
    # proto3 `optional` fields: only set what was given, so the server sees "unset".
    for name, value in (
        ("seed", seed),
        ("d_max", d_max),
        ("temperature", temperature),
        ("local_horizon", local_horizon),
        ("sample_subgoal", sample_subgoal),
        ("prune_failed", prune_failed),
    ):
        if value is not None:
            setattr(opts, name, value)
    return opts


# Sent with Act and EndEpisode so a proxy can route a session's calls to the replica that holds it
# (the session id starts with the replica's id, see deploy/nginx).
SESSION_HEADER = "l3p-session"


def channel_credentials(
    ca: str | Path | None = None, cert: str | Path | None = None, key: str | Path | None = None
) -> grpc.ChannelCredentials:
    """TLS credentials: trust ``ca`` (PEM; the system roots when None) and, for mutual TLS,
    present ``cert`` with ``key``."""
    if (cert is None) != (key is None):
        raise ValueError("a client certificate needs its key, and a key its certificate")

    def read(path: str | Path | None) -> bytes | None:
        return None if path is None else Path(path).read_bytes()

    return grpc.ssl_channel_credentials(read(ca), read(key), read(cert))


def read_token(path: str | Path) -> str:
    """The bearer token in a file: its first line that is not blank or a ``#`` comment, as
    ``token`` or ``name:token`` (the server's token-file format)."""
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line.partition(":")[2] or line
    raise ValueError(f"{path} holds no token")


class PlannerClient:
    """A connection to one planner server.

    Args:
        target: ``host:port``.
        timeout_s: default deadline of every call (gRPC's own default is none: a dead
            server would block a robot forever).
        retry: policy for UNAVAILABLE on idempotent calls; ``None`` disables retries.
        keepalive_s: HTTP/2 keepalive ping interval, ``None`` to disable. Servers answer
            pings more frequent than they permit (gRPC's default: one per 5 min without data;
            ``serving.server`` permits 10 s) with GOAWAY "too_many_pings", so keep it >= 60 s
            unless the server allows less.
        credentials: TLS credentials for a secure channel (:func:`channel_credentials`);
            plaintext when ``None``.
        token: bearer token sent with every Planner call (``l3p serve --auth-token-file``).
        tls_server_name: the name to check the server's certificate against, when the target
            address is not one the certificate names.
        options: extra gRPC channel options, appended last (so they win).
    """

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = 5.0,
        retry: RetryPolicy | None = RetryPolicy(),
        keepalive_s: float | None = 60.0,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        tls_server_name: str | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.target = target
        self.timeout_s = timeout_s
        self.retry = retry or NO_RETRY
        self._rng = random.Random()
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        opts: list[tuple[str, Any]] = [
            ("grpc.primary_user_agent", "l3p-client/1"),
            # Reconnect quickly after a server restart (gRPC's default backoff grows to 120 s).
            # Not grpc.min_reconnect_backoff_ms: that is also the connect timeout (20 s).
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ]
        if keepalive_s is not None:
            if keepalive_s < 60:
                log.warning(
                    "keepalive_s=%s < 60: the server must permit pings this often "
                    "or it will close the connection (GOAWAY too_many_pings)",
                    keepalive_s,
                )
            opts += [
                ("grpc.keepalive_time_ms", int(keepalive_s * 1000)),
                ("grpc.keepalive_timeout_ms", 20_000),
                # Idle pings are what servers count as abuse; robots idle between episodes.
                ("grpc.keepalive_permit_without_calls", 0),
            ]
        if tls_server_name is not None:
            opts.append(("grpc.ssl_target_name_override", tls_server_name))
        opts += list(options)
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=opts)
        self._stub = pb_grpc.PlannerStub(self._channel)

    # -- lifecycle

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> PlannerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Block until the channel connects; ``Unavailable`` after ``timeout_s``."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            raise Unavailable(
                grpc.StatusCode.UNAVAILABLE,
                f"no planner server reachable at {self.target} within {timeout_s} s",
                "connect",
            ) from None

    # -- unary calls

    def _call(
        self,
        method: str,
        fn: Callable[..., _T],
        request: Any,
        *,
        timeout: float | None,
        retry: bool,
        session_id: str | None = None,
    ) -> _T:
        policy = self.retry if retry else NO_RETRY
        timeout = self.timeout_s if timeout is None else timeout
        metadata = self._metadata
        if session_id is not None:
            metadata += ((SESSION_HEADER, session_id),)
        for attempt in range(1, policy.max_attempts + 1):
            try:
                return fn(request, timeout=timeout, metadata=metadata)
            except grpc.RpcError as err:
                error = _translate(err, method)
                if isinstance(error, DeadlineExceeded):  # say which deadline and where
                    raise DeadlineExceeded(
                        error.code, f"{error.message} (timeout {timeout:g} s, server {self.target})",
                        method,
                    ) from None
                if error.code not in _RETRIED:
                    raise error from None
                if attempt == policy.max_attempts:
                    tries = f" (gave up after {attempt} attempts)" if attempt > 1 else ""
                    raise type(error)(error.code, error.message + tries, method) from None
                wait = policy.backoff_s(attempt, self._rng)
                log.warning(
                    "%s: %s (%s); retry %d/%d in %.2f s",
                    method, error.code.name, error.message, attempt, policy.max_attempts - 1, wait,
                )
                time.sleep(wait)
        raise AssertionError("unreachable")

    def model_info(self, *, timeout: float | None = None, retry: bool = True) -> ModelInfo:
        """Env id, dims, landmark count, bundle hash and planner defaults. Retried."""
        r = self._call(
            "GetModelInfo", self._stub.GetModelInfo, pb.GetModelInfoRequest(),
            timeout=timeout, retry=retry,
        )
        return ModelInfo.from_proto(r)

    def start_episode(
        self,
        goal: Any,
        options: pb.EpisodeOptions | None = None,
        *,
        timeout: float | None = None,
        retry: bool = True,
    ) -> pb.StartEpisodeResponse:
        """Open a session (low level; prefer :meth:`episode`). Retried, see module doc."""
        req = pb.StartEpisodeRequest(goal=_floats(goal, "goal"), options=options)
        return self._call("StartEpisode", self._stub.StartEpisode, req, timeout=timeout, retry=retry)

    def act(self, session_id: str, observation: Any, *, timeout: float | None = None) -> Step:
        """One observation in, one action out (low level). Never retried, see module doc."""
        req = pb.ActRequest(session_id=session_id, observation=_floats(observation, "observation"))
        t0 = time.perf_counter()
        r = self._call("Act", self._stub.Act, req, timeout=timeout, retry=False, session_id=session_id)
        return Step.from_proto(r, time.perf_counter() - t0)

    def end_episode(
        self, session_id: str, *, timeout: float | None = None, retry: bool = True
    ) -> EpisodeSummary:
        """Free a session. Retried: ending twice is harmless (the second answers NOT_FOUND)."""
        r = self._call(
            "EndEpisode", self._stub.EndEpisode, pb.EndEpisodeRequest(session_id=session_id),
            timeout=timeout, retry=retry, session_id=session_id,
        )
        return EpisodeSummary(steps=r.steps, replans=r.replans)

    # -- episodes

    def episode(
        self, goal: Any, mode: str | None = None, *, resume: bool = False, **options: Any
    ) -> Episode:
        """A unary-call episode; use as ``with client.episode(goal) as ep: ep.act(obs)``.

        ``options``: ``seed``, ``d_max``, ``temperature``, ``search``, ``local_horizon``,
        ``sample_subgoal``, ``prune_failed`` (``None`` = the bundle's default). ``resume``: see the module doc.
        """
        return Episode(self, goal, episode_options(mode, **options), resume)

    def stream_episode(
        self,
        goal: Any,
        mode: str | None = None,
        *,
        max_duration_s: float | None = None,
        resume: bool = False,
        **options: Any,
    ) -> StreamEpisode:
        """An episode on one ``Control`` stream; same interface as :meth:`episode`.

        Each ``act`` waits at most the client's ``timeout_s`` (or its own ``timeout``);
        ``max_duration_s`` optionally bounds the whole stream (each stream, after a resume).
        """
        return StreamEpisode(self, goal, episode_options(mode, **options), max_duration_s, resume)


class Episode:
    """One session over unary calls. ``with`` starts it and always ends it."""

    def __init__(
        self, client: PlannerClient, goal: Any, options: pb.EpisodeOptions, resume: bool = False
    ) -> None:
        self._client = client
        self.goal = np.asarray(goal, dtype=np.float32).ravel()
        self.options = options
        self.resume = resume
        self.resumes = 0  # sessions replaced after their server was lost
        self.session_id: str | None = None
        self.landmark_to_goal: np.ndarray | None = None  # [N] steps; -1: no path to the goal
        self.summary: EpisodeSummary | None = None  # EndEpisode's answer (the last session's)
        self._ended = False

    def start(self) -> Episode:
        if self.session_id is not None:
            raise RuntimeError("episode already started")
        self._open()
        return self

    def _open(self) -> None:
        r = self._client.start_episode(self.goal, self.options)
        self.session_id = r.session_id
        self.landmark_to_goal = np.array(r.landmark_to_goal, dtype=np.float32)

    def act(self, observation: Any, *, timeout: float | None = None) -> Step:
        if self.session_id is None or self._ended:
            raise RuntimeError("episode not started or already ended")
        try:
            return self._client.act(self.session_id, observation, timeout=timeout)
        except PlannerError as lost:
            _resume_or_raise(self, lost, "session %s lost (%s); resuming the episode in a new session")
        step = self._client.act(self.session_id, observation, timeout=timeout)
        return dataclasses.replace(step, resumed=True)

    def end(self, *, retry: bool = True) -> EpisodeSummary | None:
        """End the session (idempotent). ``None`` if the server no longer knew it."""
        if self.session_id is None or self._ended:
            return self.summary
        try:
            self.summary = self._client.end_episode(self.session_id, retry=retry)
        except NotFound:
            # Expired, or a retried EndEpisode whose first attempt did arrive: gone either way.
            pass
        except Unavailable:
            if not self.resume:
                raise
            # Its server is gone, and the session with it (or freed by that server's TTL).
        self._ended = True
        return self.summary

    def __enter__(self) -> Episode:
        return self if self.session_id is not None else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc_type is None:
            self.end()
            return
        try:
            # Best effort, no backoff: the loop is failing (or Ctrl-C) and must not wait ~10 s.
            self.end(retry=False)
        except PlannerError as end_err:  # never mask the control loop's own exception
            log.warning("could not end session %s: %s (the server's TTL will free it)",
                        self.session_id, end_err)


_CLOSE = object()  # request-queue sentinel: half-close the stream
_EOS = object()  # response-queue sentinel: the server completed the stream


class _Stream:
    """One ``Control`` call: a request queue feeding it and a reader thread draining it.

    gRPC's sync stream API has no per-message deadline, so the reader moves responses into a
    queue that ``next`` waits on with a timeout."""

    def __init__(self, client: PlannerClient, max_duration_s: float | None) -> None:
        self.requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.responses: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.call = client._stub.Control(
            iter(self.requests.get, _CLOSE), timeout=max_duration_s, metadata=client._metadata)
        self.reader = threading.Thread(target=self._read, name="l3p-control-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            for resp in self.call:
                self.responses.put(resp)
            self.responses.put(_EOS)
        except grpc.RpcError as err:
            self.responses.put(err)

    def close(self, cancel: bool, wait_s: float) -> None:
        self.requests.put(_CLOSE)  # also unblocks the request iterator's thread
        if cancel:
            self.call.cancel()
        else:
            # Half-closed: the server ends the session and completes the call.
            self.reader.join(wait_s)
            if self.reader.is_alive():
                self.call.cancel()
        self.reader.join(1.0)


class StreamEpisode:
    """One session on a ``Control`` stream. ``with`` opens it; leaving closes it.

    ``act`` waits for its answer at most the timeout, then cancels the stream (which ends the
    session on the server). With ``resume``, a stream lost with its server is replaced by a new
    one carrying the same goal and options (see the module doc)."""

    def __init__(
        self,
        client: PlannerClient,
        goal: Any,
        options: pb.EpisodeOptions,
        max_duration_s: float | None,
        resume: bool = False,
    ) -> None:
        self._client = client
        self.goal = np.asarray(goal, dtype=np.float32).ravel()
        self.options = options
        self.max_duration_s = max_duration_s
        self.resume = resume
        self.resumes = 0
        self.session_id: str | None = None
        self.landmark_to_goal: np.ndarray | None = None  # [N] steps; -1: no path to the goal
        self._stream: _Stream | None = None
        self._error: PlannerError | None = None
        self._closed = False
        self._steps = 0
        self._replans = 0

    def _next(self, timeout: float | None, expect: str) -> Any:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise RuntimeError("stream episode already ended")
        assert self._stream is not None
        timeout = self._client.timeout_s if timeout is None else timeout
        try:
            item = self._stream.responses.get(timeout=timeout)
        except queue.Empty:
            self._fail(DeadlineExceeded(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no {expect!r} reply within {timeout:g} s (server {self._client.target}); "
                "stream cancelled",
                "Control",
            ))
        if isinstance(item, grpc.RpcError):
            self._fail(_translate(item, "Control"))
        if item is _EOS:
            self._fail(PlannerError(
                grpc.StatusCode.UNKNOWN,
                f"the server closed the stream while a {expect} was expected", "Control"))
        kind = item.WhichOneof("msg")
        if kind != expect:
            self._fail(PlannerError(
                grpc.StatusCode.UNKNOWN, f"expected {expect!r}, got {kind!r}", "Control"))
        return getattr(item, kind)

    def _fail(self, error: PlannerError) -> None:
        self._error = error
        self._shutdown(cancel=True)
        raise error

    def start(self) -> StreamEpisode:
        if self._stream is not None:
            raise RuntimeError("stream episode already started")
        self._open()
        return self

    def _open(self) -> None:
        """A new stream carrying the episode's start, retried while it breaks before 'started'
        (UNAVAILABLE, or a proxy's reset): such a stream took its session with it."""
        policy = self._client.retry
        for attempt in range(1, policy.max_attempts + 1):
            try:
                return self._open_once()
            except PlannerError as error:
                if error.code not in _LOST or attempt == policy.max_attempts:
                    raise
                wait = policy.backoff_s(attempt, self._client._rng)
                log.warning("Control: stream failed to start (%s); retry %d/%d in %.2f s",
                            error.message, attempt, policy.max_attempts - 1, wait)
                time.sleep(wait)

    def _open_once(self) -> None:
        self._error, self._closed = None, False
        self._stream = _Stream(self._client, self.max_duration_s)
        start = pb.StartEpisodeRequest(goal=_floats(self.goal, "goal"), options=self.options)
        self._stream.requests.put(pb.ControlRequest(start=start))
        started = self._next(None, "started")
        self.session_id = started.session_id
        self.landmark_to_goal = np.array(started.landmark_to_goal, dtype=np.float32)

    def _exchange(self, observation: Any, timeout: float | None) -> Step:
        assert self._stream is not None
        obs = pb.ActRequest(observation=_floats(observation, "observation"))
        t0 = time.perf_counter()
        self._stream.requests.put(pb.ControlRequest(observation=obs))
        return Step.from_proto(self._next(timeout, "action"), time.perf_counter() - t0)

    def act(self, observation: Any, *, timeout: float | None = None) -> Step:
        if self._stream is None:
            raise RuntimeError("stream episode not started")
        try:
            step = self._exchange(observation, timeout)
        except PlannerError as lost:
            _resume_or_raise(self, lost, "stream of session %s lost (%s); resuming the episode on a new stream")
            step = dataclasses.replace(self._exchange(observation, timeout), resumed=True)
        self._steps += 1
        self._replans += step.replanned
        return step

    def _shutdown(self, cancel: bool) -> None:
        if self._closed:
            return
        self._closed = True
        if self._stream is not None:
            self._stream.close(cancel, self._client.timeout_s)

    def end(self) -> EpisodeSummary:
        """Close the stream (idempotent); steps and re-plans as counted by this client."""
        self._shutdown(cancel=self._error is not None)
        return EpisodeSummary(steps=self._steps, replans=self._replans)

    def __enter__(self) -> StreamEpisode:
        return self if self._stream is not None else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        # On an exception, cancel rather than half-close: the server ends the session either way.
        self._shutdown(cancel=exc_type is not None)
