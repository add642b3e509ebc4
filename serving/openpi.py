"""The openpi listener: openpi's websocket protocol as another front door of the planner server.

    l3p serve --models DIR --openpi-port 8000

A robot written for an openpi policy server (openpi-client's ``WebsocketClientPolicy``) connects
with ``ws://HOST:8000`` (``wss://`` when the server has --tls-cert), sending its token as
``Authorization: Api-Key TOKEN`` (``Bearer`` is accepted too). The server sends one metadata frame
(the default model's info, the key mapping, the limits), then answers each observation dict with
one reply dict: ``actions`` [1, action_dim] and ``subgoal`` [1, goal_dim] (float32; every array
has openpi's leading chunk axis, of size 1: the planner is closed loop), ``subgoal_index``,
``replanned``, ``counter``, ``step``, ``estimated_distance``, ``episode``, ``model``,
``version`` and ``server_timing`` (``infer_ms``, and ``prev_total_ms`` from the second step).

One connection is one robot; its episodes are sessions of the same store, on the same models,
batched with gRPC's steps by the same engines, owned like a Control stream's (no other call can
reach them) and counted against the same per-caller and global limits. A frame's goal, model or
options that differ from the running episode's, or a true reset flag, start a new episode
(the previous one ends); the episode ends with the connection.

Bad input never reaches the planner and never disturbs another robot: the connection gets an error
frame (text, as openpi's own server sends, so the client raises it) saying ``CODE: message`` with
gRPC's status names, and is closed: 1008 (policy violation) for a bad frame, a flood or an
unknown or expired session, 1013 (try again later) at a session limit, 1011 for a server bug. A
frame over --openpi-max-frame-bytes is refused by the websocket layer before it is read (close
1009, the limit in the reason). A robot may send MAX_PENDING_FRAMES frames ahead of its
answers; more is a flood. A connection thus holds at most about 2 x MAX_PENDING_FRAMES frames
(ours and the websocket layer's queue).

No robot waits on another: reading a frame costs about a copy of its bytes whatever it holds
(serving/openpi_wire.py builds only the values the planner reads, each within a bound, and skips
the rest unbuilt; a frame past a bound is refused RESOURCE_EXHAUSTED). Peers are bounded on their
own (serving/openpi_peers.py): the opening handshake (TLS and HTTP) has OPEN_TIMEOUT_S, with a cap
on those under way per address; connections count against their caller's quota; a connection
that sends no frame for --openpi-idle-timeout, its first frame included, is closed (1000). A peer
that never reads its answers is closed by the websocket keepalive (a ping unanswered for about
20 s); until then it holds at most its queued frames.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import http
import logging
import ssl
import time
import urllib.parse
from typing import Any

import numpy as np
import websockets
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.frames import CloseCode
from websockets.http11 import Request as Handshake
from websockets.http11 import Response

from l3p.protos import l3p_planner_pb2 as pb
from l3p.serving.config import ServeConfig
from l3p.serving.errors import InvalidRequestError, UnknownModelError, status_of
from l3p.serving.logs import event, limited_event
from l3p.serving.metrics import Metrics
from l3p.serving.openpi_peers import OPEN_TIMEOUT_S, PEER_LOG, Peer, PeerBounds
from l3p.serving.openpi_wire import PROMPT_KEY, FrameCostError, OpenpiKeys, Request, decode, packer, request
from l3p.serving.repository import ModelVersion, Repository
from l3p.serving.security import Gatekeeper, Security, server_tls_context
from l3p.serving.servicer import PlannerServicer
from l3p.serving.sessions import Owner, Session, SessionStore
from l3p.serving.startup import bind_error

# Frames a robot may send before the answers to its earlier ones (openpi-client sends one and
# waits); past this many waiting, the connection is flooding.
MAX_PENDING_FRAMES = 4
MODELS_PATH = "/models/"  # ws://HOST:PORT/models/NAME: the connection's model (its metadata, its episodes)
HEALTH_PATH = "/healthz"  # openpi's health check: 200 "OK" while serving, no token needed
_API_KEY_SCHEMES = ("api-key", "bearer")
_METHOD = "openpi"  # how errors and refusals name this front door in logs


def url_model(path: str) -> str:
    """The model a connection's URL names (``/models/NAME``), "" for the default (any other path)."""
    head, _, name = path.partition("?")[0].partition(MODELS_PATH)
    return urllib.parse.unquote(name.strip("/")) if head == "" and name else ""


class FloodError(InvalidRequestError):
    """More frames waiting than MAX_PENDING_FRAMES."""


@dataclasses.dataclass(eq=False)
class _Robot:
    """One connection: its owner and its running episode, if any."""

    ws: ServerConnection
    owner: Owner
    session: Session | None = None
    goal: np.ndarray | None = None
    model: str = ""
    options: pb.EpisodeOptions = dataclasses.field(default_factory=pb.EpisodeOptions)
    episodes: int = 0
    refused: bool = False  # an error frame was sent: the rest is dropped
    idle: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


def api_key(headers) -> str | None:
    """The token of the first ``Authorization: Api-Key TOKEN`` (or ``Bearer TOKEN``) header."""
    for value in headers.get_all("Authorization")[:1]:
        scheme, _, token = value.strip().partition(" ")
        token = token.strip()
        if scheme.lower() in _API_KEY_SCHEMES and token and " " not in token:
            return token
    return None


def cert_common_name(ws: ServerConnection) -> str | None:
    """The verified client certificate's common name (mutual TLS), or None."""
    peer = ws.transport.get_extra_info("peercert") if ws.transport is not None else None
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


class _LimitedLogs(logging.Filter):
    """The websocket library's log lines that clients can cause (failed handshakes): one budget
    for all of them (PEER_LOG's), each one line, its exception named, not traced."""

    def filter(self, record: logging.LogRecord) -> bool:
        if PEER_LOG.allow("websockets") is None:
            return False
        if record.exc_info and record.exc_info[1] is not None:
            record.msg = f"{record.getMessage()}: {record.exc_info[1]!r}"[:500]
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


_library_log = logging.getLogger("l3p.serving.openpi.websockets")
_library_log.setLevel(logging.WARNING)  # not a line per connection opened or closed
_library_log.addFilter(_LimitedLogs())


class OpenpiListener:
    """The listener and its connections, on the gRPC server's event loop and session store.

    Made with `open` (binds the port); `stop` drains and closes it like the gRPC server."""

    def __init__(self, servicer: PlannerServicer, models: Repository, store: SessionStore,
                 metrics: Metrics, gate: Gatekeeper | None, keys: OpenpiKeys, max_frame_bytes: int,
                 max_connections: int, idle_timeout_s: float):
        self._servicer = servicer
        self._models = models
        self._store = store
        self._metrics = metrics
        self._gate = gate
        self.keys = keys
        self.max_frame_bytes = max_frame_bytes
        self._idle_timeout_s = idle_timeout_s
        self._peers = PeerBounds(metrics, lambda: store.per_principal, max_connections)
        self._robots: set[_Robot] = set()
        self._stopping = False
        self._server: Server | None = None
        self._metadata_of: dict[str, tuple] = {}  # model ("" the default) -> (version, served, frame)
        self.port = 0

    async def open(self, host: str, port: int, tls: ssl.SSLContext | None, share_port: bool) -> None:
        """Binds host:port (OSError if it cannot) and starts serving."""
        self._server = await serve(
            self._connection, host, port, ssl=tls, reuse_port=share_port or None,
            process_request=self._admit, compression=None, max_size=self.max_frame_bytes,
            max_queue=MAX_PENDING_FRAMES, server_header=None, logger=_library_log,
            open_timeout=OPEN_TIMEOUT_S, create_connection=functools.partial(Peer, self._peers))
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self, grace_s: float | None) -> None:
        """Takes no new connection; steps in flight get grace_s (None: 0) to be answered, then
        every connection is closed (1001, going away)."""
        self._stopping = True  # handshakes are answered 503 from now on
        if self._server is None:
            return
        busy = [asyncio.ensure_future(robot.idle.wait()) for robot in self._robots if not robot.idle.is_set()]
        if busy and grace_s:
            await asyncio.wait(busy, timeout=grace_s)
        for waiter in busy:
            waiter.cancel()
        self._server.close(close_connections=True)
        await self._server.wait_closed()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_closed()

    # -- the handshake

    def _admit(self, connection: Peer, req: Handshake) -> Response | None:
        """Answers the health check; refuses a handshake without an accepted token, past its
        caller's connection quota or while stopping (HTTP status, one line)."""
        connection.request_read()
        if req.path.split("?", 1)[0] == HEALTH_PATH:
            if self._stopping:
                return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "shutting down\n")
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self._stopping:
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "shutting down\n")
        refusal = self._gate.token_refusal(api_key(req.headers)) if self._gate is not None else None
        if refusal is not None:
            code, _ = refusal
            reason = ("this server requires a token: send header 'Authorization: Api-Key <token>' "
                      "(openpi-client: WebsocketClientPolicy(..., api_key=TOKEN))"
                      if api_key(req.headers) is None else "the token is not accepted by this server")
            self._refused(code.name, reason)
            return connection.respond(http.HTTPStatus.UNAUTHORIZED, reason + "\n")
        principal = "" if self._gate is None else self._gate.principal_of(
            api_key(req.headers), cert_common_name(connection))
        reason = connection.admit(principal)
        if reason is not None:
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, reason + "\n")
        return None

    def _refused(self, code: str, reason: str) -> None:
        self._metrics.errors.labels(code).inc()
        limited_event(logging.INFO, "request_refused", PEER_LOG, method=_METHOD, code=code, message=reason)

    # -- a connection

    async def _connection(self, ws: Peer) -> None:
        robot = _Robot(ws, Owner.of_stream(ws.principal or ""), model=url_model(ws.request.path))
        robot.idle.set()
        self._robots.add(robot)
        self._metrics.openpi_connections.inc()
        frames: asyncio.Queue[tuple[bytes | str, float]] = asyncio.Queue()
        answering = asyncio.create_task(self._answer(robot, frames))
        refusing: list[asyncio.Task] = []
        try:
            try:
                metadata = self._metadata(robot.model)
            except UnknownModelError:
                # openpi-client reads the first frame as metadata: the close reason (at most 123
                # bytes) is what its robot sees
                reason = f"model {robot.model[:40]!r} is not served here; models: {', '.join(self._models.models)}"
                self._failed("NOT_FOUND", reason)
                await ws.close(CloseCode.POLICY_VIOLATION, reason[:123])
                return
            await ws.send(metadata)
            # Frames are read while a step runs, so a robot that does not wait for its answers
            # is seen, and refused, before it has queued more than MAX_PENDING_FRAMES. Once a
            # frame is refused, the rest are read and dropped: unread, they would stop the
            # reading of the robot's close.
            while True:
                try:
                    async with asyncio.timeout(self._idle_timeout_s):
                        frame = await ws.recv()
                except TimeoutError:
                    await self._close_idle(robot)
                    break
                if answering.done() or robot.refused:
                    continue
                if frames.qsize() >= MAX_PENDING_FRAMES:
                    answering.cancel()
                    refusing.append(asyncio.create_task(self._refuse(robot, FloodError(
                        f"more than {MAX_PENDING_FRAMES} frames sent ahead of their answers: send "
                        "one observation, wait for its answer"))))
                    continue
                frames.put_nowait((frame, time.perf_counter()))
        except websockets.ConnectionClosed as closed:
            if closed.sent is not None and closed.sent.code == CloseCode.MESSAGE_TOO_BIG:
                self._failed("RESOURCE_EXHAUSTED", f"a frame over {self.max_frame_bytes} bytes "
                                                   "(--openpi-max-frame-bytes)")
        finally:
            answering.cancel()
            await asyncio.gather(answering, *refusing, return_exceptions=True)
            self._end_episode(robot, "connection_closed")
            self._robots.discard(robot)
            self._metrics.openpi_connections.dec()

    async def _close_idle(self, robot: _Robot) -> None:
        reason = f"no frame for {self._idle_timeout_s:g} s (--openpi-idle-timeout)"
        self._peers.refused("idle", reason)
        self._end_episode(robot, "idle")
        await robot.ws.close(CloseCode.NORMAL_CLOSURE, reason)

    async def _answer(self, robot: _Robot, frames: asyncio.Queue) -> None:
        """Answers the robot's frames in order until one is refused or the connection ends."""
        pack = packer().pack
        previous_ms: float | None = None
        while True:
            frame, received = await frames.get()
            robot.idle.clear()
            try:
                reply = await self._step(robot, frame)
                timing = {"infer_ms": (time.perf_counter() - received) * 1e3}
                if previous_ms is not None:
                    timing["prev_total_ms"] = previous_ms
                reply["server_timing"] = timing
                data = pack(reply)
            except Exception as exc:
                robot.idle.set()
                await self._refuse(robot, exc)
                return
            try:
                await robot.ws.send(data)
            finally:
                robot.idle.set()
            previous_ms = (time.perf_counter() - received) * 1e3
            if self._stopping:
                await robot.ws.close(CloseCode.GOING_AWAY, "server shutting down")
                return

    async def _step(self, robot: _Robot, frame: bytes | str) -> dict:
        asked = request(decode(frame, self.keys), self.keys)
        if robot.session is None or self._new_episode(robot, asked):
            await self._start(robot, asked)
        session = self._store.get(robot.session.id, robot.owner)  # NOT_FOUND once expired
        answer = await self._servicer.step(session, asked.observation, self.keys.observation)
        return {
            "actions": np.asarray(answer.action, np.float32).reshape(1, -1),
            "subgoal": np.asarray(answer.subgoal, np.float32).reshape(1, -1),
            "subgoal_index": answer.subgoal_index,
            "replanned": answer.replanned,
            "counter": answer.counter,
            "step": answer.step,
            "estimated_distance": answer.estimated_distance,
            "episode": robot.episodes - 1,
            "model": session.model.name,
            "version": session.model.version,
        }

    @staticmethod
    def _new_episode(robot: _Robot, asked: Request) -> bool:
        return (asked.reset
                or (asked.goal is not None and not np.array_equal(asked.goal, robot.goal))
                or (asked.model is not None and asked.model != robot.model)
                or (asked.options is not None and asked.options != robot.options))

    async def _start(self, robot: _Robot, asked: Request) -> None:
        goal = asked.goal if asked.goal is not None else robot.goal
        if goal is None:
            dim = self._models.get(asked.model if asked.model is not None else robot.model).info.goal_dim
            if asked.prompt:
                raise InvalidRequestError(
                    f"a {PROMPT_KEY!r} is not a goal this planner can read: send the goal as {dim} numbers "
                    f"under {self.keys.goal!r} in the first observation of each episode (a target position, "
                    "say; --openpi-key goal=KEY maps another)")
            raise InvalidRequestError(
                f"the first observation of an episode carries its goal: no {self.keys.goal!r} ({dim} numbers) "
                "in the observation dict (--openpi-key goal=KEY maps another)")
        model = asked.model if asked.model is not None else robot.model
        options = asked.options if asked.options is not None else robot.options
        self._end_episode(robot, "reset" if asked.reset else "new_goal")
        start = pb.StartEpisodeRequest(goal=goal, options=options, model=model)
        robot.session, _ = await self._servicer.start_episode(start, robot.owner, self.keys.goal)
        robot.goal, robot.model, robot.options = goal, model, options
        robot.episodes += 1

    def _end_episode(self, robot: _Robot, reason: str) -> None:
        if robot.session is not None:
            self._servicer.end_session(robot.session.id, reason)
            robot.session = None

    # -- answers

    def _metadata(self, model: str = "") -> bytes:
        """The frame sent on connect: the info of the URL's model (ws://HOST:PORT/models/NAME; else
        the default model), the key mapping and the limits (made again once a model is swapped or added)."""
        current = self._models.get(model)
        served = tuple(self._models.models)
        cached = self._metadata_of.get(model)
        if cached is None or cached[:2] != (current, served):
            cached = self._metadata_of[model] = (current, served, self._metadata_frame(current, served))
        return cached[2]

    def _metadata_frame(self, current: ModelVersion, served: tuple[str, ...]) -> bytes:
        info = current.info
        return packer().pack({
            "server": "l3p",
            "model": info.model,
            "version": info.version,
            "models": list(served),
            "env_id": info.env_id,
            "obs_dim": info.obs_dim,
            "goal_dim": info.goal_dim,
            "action_dim": info.action_dim,
            "action_low": np.asarray(info.action_low, np.float32),
            "action_high": np.asarray(info.action_high, np.float32),
            "n_landmarks": info.n_landmarks,
            "bundle_sha256": info.bundle_sha256,
            "planner_defaults": dataclasses.asdict(current.bundle.planner_defaults),
            "action_horizon": 1,
            "keys": dataclasses.asdict(self.keys),
            "max_frame_bytes": self.max_frame_bytes,
            "max_pending_frames": MAX_PENDING_FRAMES,
        })

    async def _refuse(self, robot: _Robot, exc: Exception) -> None:
        """Ends the robot's episode, sends the error frame, closes; counted and logged as gRPC's
        errors are."""
        if robot.refused:
            return
        robot.refused = True
        self._end_episode(robot, "refused")
        if isinstance(exc, (FloodError, FrameCostError)):
            code, close = "RESOURCE_EXHAUSTED", CloseCode.POLICY_VIOLATION
            self._metrics.openpi_refused.labels("flood" if isinstance(exc, FloodError) else "frame_cost").inc()
        else:
            status = status_of(exc)
            code = "INTERNAL" if status is None else status.name
            close = {"INTERNAL": CloseCode.INTERNAL_ERROR,
                     "RESOURCE_EXHAUSTED": CloseCode.TRY_AGAIN_LATER}.get(code, CloseCode.POLICY_VIOLATION)
        if code == "INTERNAL":
            event(logging.ERROR, "internal_error", exc, method=_METHOD, error=repr(exc))
            message = "internal error; see the server log"
        else:
            message = str(exc)
        self._failed(code, message)
        try:
            await robot.ws.send(f"{code}: {message}")
            await robot.ws.close(close, code)
        except websockets.ConnectionClosed:
            pass  # the robot left first: nobody to tell

    def _failed(self, code: str, message: str) -> None:
        self._metrics.errors.labels(code).inc()
        limited_event(logging.INFO, "request_error", method=_METHOD, code=code, message=message)


async def open_listener(server: Any, config: ServeConfig, security: Security, share_port: bool) -> OpenpiListener:
    """The listener of ``--openpi-port`` over the models, sessions, servicer and metrics of
    ``server`` (a PlannerServer: not imported, it imports this module) and the gatekeeper of
    ``security``, serving; ServeError if its port cannot be bound."""
    listener = OpenpiListener(server.servicer, server.models, server.store, server.metrics, security.gate,
                              OpenpiKeys.of(config.openpi_key), config.openpi_max_frame_bytes,
                              max_connections=config.max_sessions, idle_timeout_s=config.openpi_idle_timeout)
    tls = (None if config.tls_cert is None
           else server_tls_context(config.tls_cert, config.tls_key, config.tls_client_ca))
    try:
        await listener.open(config.host, config.openpi_port, tls, share_port)
    except OSError as exc:
        raise bind_error(config.host, config.openpi_port, "--openpi-port", exc) from None
    return listener
