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

Episode options (``mode``, ``seed``, and the per-episode planner options of
`l3p.core.config.EPISODE_OPTIONS`) are checked here with the server's own ranges: a bad value
raises ``ValueError`` before any call. The library's parts live in ``errors``, ``messages``
and ``episodes``; every public name is importable from this module.

Errors are typed (``InvalidArgument``, ``NotFound``, ``FailedPrecondition``,
``ResourceExhausted``, ``Unavailable``, ``DeadlineExceeded``, ``Unauthenticated``; all
``PlannerError``) and carry the server's message in ``.message`` and the gRPC status in ``.code``.
An observation the server refuses (``InvalidArgument``: a wrong length, NaN/Inf, a value beyond
float32) leaves the episode usable: the next ``act`` goes on (on a stream, which the server ends
on a refused message, in a new one with the same goal: one re-plan, counted by ``ep.reopens``).

A server hosting several models (``l3p serve --models DIR``): name one per client; a client that
names none gets the server's default model::

    arm = PlannerClient("planner:50051", model="FetchPush-v4")
    names = [m.info.model for m in arm.list_models().models if m.loaded]

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

import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc

from l3p.clients.episodes import Episode, StreamEpisode
from l3p.clients.errors import (
    RETRIED,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PlannerError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    translate,
)
from l3p.clients.messages import (
    NO_RETRY,
    EpisodeSummary,
    ModelInfo,
    RetryPolicy,
    Step,
    as_floats,
    episode_options,
)
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
    "channel_credentials",
    "episode_options",
    "read_token",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


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
            ``l3p serve`` permits 10 s) with GOAWAY "too_many_pings", so keep it >= 60 s
            unless the server allows less.
        credentials: TLS credentials for a secure channel (:func:`channel_credentials`);
            plaintext when ``None``.
        token: bearer token sent with every Planner call (``l3p serve --auth-token-file``).
        tls_server_name: the name to check the server's certificate against, when the target
            address is not one the certificate names.
        model: the served model this client's calls use (``l3p serve --models``); ``None``: the
            server's default model.
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
        model: str | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.target = target
        self.model = model
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
        self._tls = credentials is not None
        self._mismatch: str | None = None  # a TLS / plaintext mismatch, once found
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

    @property
    def tls_mismatch(self) -> str | None:
        """A TLS / plaintext mismatch with the server, once a call found one: not worth retrying."""
        return self._mismatch

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
                error = translate(err, method)
                if isinstance(error, DeadlineExceeded):  # say which deadline and where
                    raise DeadlineExceeded(
                        error.code, f"{error.message} (timeout {timeout:g} s, server {self.target})",
                        method,
                    ) from None
                if error.code not in RETRIED:
                    raise error from None
                mismatch = self._tls_mismatch(error) if attempt == 1 else self._mismatch
                if mismatch:  # not transient: retrying cannot help
                    raise type(error)(error.code, mismatch, method) from None
                if attempt == policy.max_attempts:
                    tries = f" (gave up after {attempt} attempts)" if attempt > 1 else ""
                    raise type(error)(error.code, error.message + tries, method) from None
                wait = policy.backoff_s(attempt, self._rng)
                # INFO: quiet unless asked (l3p run/eval -v); giving up raises one error that says it.
                log.info(
                    "%s: %s (%s); retry %d/%d in %.2f s",
                    method, error.code.name, error.message, attempt, policy.max_attempts - 1, wait,
                )
                time.sleep(wait)
        raise AssertionError("unreachable")

    def _tls_mismatch(self, error: PlannerError) -> str | None:
        """Why an unreachable server is a TLS / plaintext mismatch, or None. A TLS channel to a
        plaintext server fails its handshake (WRONG_VERSION_NUMBER); a plaintext channel to a TLS
        server only sees the socket closed, so this asks the server for a TLS handshake once."""
        if error.code != grpc.StatusCode.UNAVAILABLE:
            return None
        if self._tls:
            if "WRONG_VERSION_NUMBER" in error.message:
                self._mismatch = (f"TLS handshake with {self.target} failed: the server does not speak TLS "
                                  f"(it answers in plaintext); connect without TLS (no --tls-ca), or serve TLS "
                                  f"(l3p serve --tls-cert/--tls-key)")
        elif _speaks_tls(self.target):
            self._mismatch = (f"the server at {self.target} speaks TLS and this client connected in plaintext: "
                              f"connect with TLS (--tls-ca PEM; PlannerClient(credentials="
                              f"channel_credentials(ca)))")
        return self._mismatch

    def control(self, requests: Iterator[pb.ControlRequest], timeout: float | None) -> Any:
        """The raw ``Control`` stream call (low level; prefer :meth:`stream_episode`)."""
        return self._stub.Control(requests, timeout=timeout, metadata=self._metadata)

    def backoff_s(self, retry: int) -> float:
        """The wait before retry ``retry`` (1, 2, ...) under this client's policy."""
        return self.retry.backoff_s(retry, self._rng)

    def model_info(self, *, timeout: float | None = None, retry: bool = True) -> ModelInfo:
        """Env id, dims, landmark count, bundle hash and planner defaults. Retried."""
        r = self._call(
            "GetModelInfo", self._stub.GetModelInfo, pb.GetModelInfoRequest(model=self.model or ""),
            timeout=timeout, retry=retry,
        )
        return ModelInfo.from_proto(r)

    def list_models(self, *, timeout: float | None = None, retry: bool = True) -> pb.ListModelsResponse:
        """Every model the server hosts (current version, live sessions, versions still draining,
        the last refused load) and its default model. Retried."""
        return self._call("ListModels", self._stub.ListModels, pb.ListModelsRequest(),
                          timeout=timeout, retry=retry)

    def reload_models(self, *, timeout: float | None = None) -> pb.ReloadModelsResponse:
        """Ask the server to load new model versions now (needs an admin token). Not retried."""
        return self._call("ReloadModels", self._stub.ReloadModels, pb.ReloadModelsRequest(),
                          timeout=timeout, retry=False)

    def start_episode(
        self,
        goal: Any,
        options: pb.EpisodeOptions | None = None,
        *,
        timeout: float | None = None,
        retry: bool = True,
    ) -> pb.StartEpisodeResponse:
        """Open a session (low level; prefer :meth:`episode`). Retried, see module doc."""
        req = pb.StartEpisodeRequest(goal=as_floats(goal, "goal"), options=options, model=self.model or "")
        return self._call("StartEpisode", self._stub.StartEpisode, req, timeout=timeout, retry=retry)

    def act(self, session_id: str, observation: Any, *, timeout: float | None = None) -> Step:
        """One observation in, one action out (low level). Never retried, see module doc."""
        req = pb.ActRequest(session_id=session_id, observation=as_floats(observation, "observation"))
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

        ``options``: ``seed`` and the per-episode planner options (`l3p.core.config.EPISODE_OPTIONS`),
        checked by :func:`episode_options`; ``None`` = the bundle's default.
        ``resume``: see the module doc.
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


def _speaks_tls(target: str, timeout_s: float = 2.0) -> bool:
    """Whether HOST:PORT completes a TLS handshake (certificate unchecked: this only asks which
    protocol the server speaks)."""
    import socket
    import ssl

    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or "/" in host:
        return False
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as sock:
            with context.wrap_socket(sock, server_hostname=None):
                return True
    except (OSError, ValueError):  # ssl.SSLError is an OSError
        return False
