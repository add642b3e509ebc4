"""An episode: one server-side session, over unary calls (`Episode`) or one ``Control`` stream
(`StreamEpisode`). Both end their session on every exit path and can resume a lost one. A step the
server refuses (INVALID_ARGUMENT) raises and leaves either usable: a unary session is untouched; the
server ends a stream on a refused message, so the next step opens a new one (same goal and options,
a new session: one re-plan; ``reopens`` counts them)."""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

import grpc
import numpy as np

from l3p.clients.errors import (
    LOST,
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    PlannerError,
    Unavailable,
    translate,
)
from l3p.clients.messages import EpisodeSummary, RetryPolicy, Step, as_floats
from l3p.protos import l3p_planner_pb2 as pb

log = logging.getLogger(__name__)


class Connection(Protocol):
    """What an episode needs of its client (`l3p.clients.client.PlannerClient`)."""

    target: str
    timeout_s: float
    retry: RetryPolicy
    model: str | None  # the served model episodes run on (None: the server's default)

    def start_episode(self, goal: Any, options: pb.EpisodeOptions | None = None) -> pb.StartEpisodeResponse: ...

    def act(self, session_id: str, observation: Any, *, timeout: float | None = None) -> Step: ...

    def end_episode(self, session_id: str, *, retry: bool = True) -> EpisodeSummary: ...

    def control(self, requests: Iterator[pb.ControlRequest], timeout: float | None) -> Any: ...

    def backoff_s(self, retry: int) -> float: ...


def _resume_or_raise(episode: Episode | StreamEpisode, lost: PlannerError, message: str) -> None:
    """After a failed step: re-raise unless the episode resumes and the server was lost; else
    open a new session (same goal and options) for the step to be retried on."""
    if not (episode.resume and lost.code in LOST):
        raise lost
    episode.lost_in_a_row += 1
    n = episode.lost_in_a_row
    if n & (n - 1) == 0:  # the 1st, 2nd, 4th, 8th ... in a row: a server down for long does not flood the log
        log.warning(message + " (%d in a row)", episode.session_id, lost, n)
    episode._open()
    episode.resumes += 1


class Episode:
    """One session over unary calls. ``with`` starts it and always ends it."""

    def __init__(
        self, client: Connection, goal: Any, options: pb.EpisodeOptions, resume: bool = False
    ) -> None:
        self._client = client
        self.goal = np.asarray(as_floats(goal, "goal"), dtype=np.float32)  # None is named, not sent as NaN
        self.options = options
        self.resume = resume
        self.resumes = 0  # sessions replaced after their server was lost
        self.lost_in_a_row = 0  # failed steps since the last one that got an action
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
            step = self._client.act(self.session_id, observation, timeout=timeout)
        except PlannerError as lost:
            _resume_or_raise(self, lost, "session %s lost (%s); resuming the episode in a new session")
            step = dataclasses.replace(self._client.act(self.session_id, observation, timeout=timeout), resumed=True)
        self.lost_in_a_row = 0
        return step

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

    def __init__(self, client: Connection, max_duration_s: float | None) -> None:
        self.requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.responses: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.call = client.control(iter(self.requests.get, _CLOSE), max_duration_s)
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
        client: Connection,
        goal: Any,
        options: pb.EpisodeOptions,
        max_duration_s: float | None,
        resume: bool = False,
    ) -> None:
        self._client = client
        self.goal = np.asarray(as_floats(goal, "goal"), dtype=np.float32)  # None is named, not sent as NaN
        self.options = options
        self.max_duration_s = max_duration_s
        self.resume = resume
        self.resumes = 0
        self.lost_in_a_row = 0  # failed steps since the last one that got an action
        self.reopens = 0  # streams opened again after the server refused a step
        self.session_id: str | None = None
        self.landmark_to_goal: np.ndarray | None = None  # [N] steps; -1: no path to the goal
        self._stream: _Stream | None = None
        self._error: PlannerError | None = None
        self._closed = False
        self._ended = False  # by its owner (end or the with block), never to be reopened
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
            self._fail(translate(item, "Control"))
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
                if error.code not in LOST or attempt == policy.max_attempts:
                    raise
                wait = self._client.backoff_s(attempt)
                log.info("Control: stream failed to start (%s); retry %d/%d in %.2f s",
                         error.message, attempt, policy.max_attempts - 1, wait)
                time.sleep(wait)

    def _open_once(self) -> None:
        self._error, self._closed = None, False
        self._stream = _Stream(self._client, self.max_duration_s)
        start = pb.StartEpisodeRequest(goal=as_floats(self.goal, "goal"), options=self.options,
                                       model=self._client.model or "")
        self._stream.requests.put(pb.ControlRequest(start=start))
        started = self._next(None, "started")
        self.session_id = started.session_id
        self.landmark_to_goal = np.array(started.landmark_to_goal, dtype=np.float32)

    def _exchange(self, observation: Any, timeout: float | None) -> Step:
        assert self._stream is not None
        obs = pb.ActRequest(observation=as_floats(observation, "observation"))
        t0 = time.perf_counter()
        self._stream.requests.put(pb.ControlRequest(observation=obs))
        return Step.from_proto(self._next(timeout, "action"), time.perf_counter() - t0)

    def act(self, observation: Any, *, timeout: float | None = None) -> Step:
        if self._stream is None:
            raise RuntimeError("stream episode not started")
        if isinstance(self._error, InvalidArgument) and not self._ended:
            self._open()  # the refused message ended the stream, not the episode
            self.reopens += 1
        try:
            step = self._exchange(observation, timeout)
        except PlannerError as lost:
            _resume_or_raise(self, lost, "stream of session %s lost (%s); resuming the episode on a new stream")
            step = dataclasses.replace(self._exchange(observation, timeout), resumed=True)
        self.lost_in_a_row = 0
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
        self._ended = True
        self._shutdown(cancel=self._error is not None)
        return EpisodeSummary(steps=self._steps, replans=self._replans)

    def __enter__(self) -> StreamEpisode:
        return self if self._stream is not None else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        # On an exception, cancel rather than half-close: the server ends the session either way.
        self._ended = True
        self._shutdown(cancel=exc_type is not None)
