"""The Planner service's handlers: requests in, the error model's status codes out.

Every episode is a session holding its own `EpisodePlanner` (core/episode.py) behind its own
lock, and the model version it started on (serving/repository.py): its steps run on that
version's engine, whatever version is current by then. The CPU work (onnxruntime, graph solves)
runs in the engine, off the event loop. Request
bodies are parsed by deserializers that never raise (`Malformed`), so a bad body is answered
INVALID_ARGUMENT like any other bad request.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.errors import (
    AdminOnlyError,
    DeadlineError,
    InvalidRequestError,
    StreamOrderError,
    status_of,
)
from l3p.serving.logs import SESSIONS, event, limited_event
from l3p.serving.mapping import act_response, episode_config, start_response
from l3p.serving.metrics import Metrics
from l3p.serving.repository import ModelVersion, Repository
from l3p.serving.sessions import Owner, Session, SessionStore

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Planner"].full_name  # "l3p.v1.Planner"

# A StartEpisode solved with less time than this left before its deadline is not answered: the
# answer would likely arrive late, and the client would never learn the session's id.
DELIVERY_MARGIN_S = 0.002

Principal = Callable[[grpc.aio.ServicerContext], str]


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


def anonymous(context: grpc.aio.ServicerContext) -> str:
    """The principal of every caller when the server asks for no credentials."""
    return ""


class PlannerServicer(pb_grpc.PlannerServicer):
    def __init__(self, models: Repository, store: SessionStore, metrics: Metrics,
                 principal: Principal = anonymous, may_reload: Callable[[], bool] = lambda: False):
        self._models = models
        self._principal = principal  # who is calling: the owner of the sessions it opens
        self._store = store
        self._metrics = metrics
        self._may_reload = may_reload  # admin tokens are configured (the interceptor checks them)

    @_answers_errors
    async def GetModelInfo(self, request, context):
        await self._models.catch_up()
        return self._models.get(request.model).info

    @_answers_errors
    async def ListModels(self, request, context):
        await self._models.catch_up()
        return self._models.statuses()

    @_answers_errors
    async def ReloadModels(self, request, context):
        if not self._may_reload():
            raise AdminOnlyError(
                "ReloadModels is off on this server: start it with --admin-token-file and call "
                "with an admin token (the repository watch, --poll-interval, swaps without it)")
        loads = await self._models.reload()
        event(logging.INFO, "models_reloaded", caller=self._principal(context),
              loads=[(load.model, load.version, load.loaded) for load in loads])
        return pb.ReloadModelsResponse(loads=loads)

    @_answers_errors
    async def StartEpisode(self, request, context):
        # A start whose deadline passes while it is solved must not leave a session nobody knows
        # the id of. gRPC lets the handler run on past the deadline, so one that finishes with
        # under DELIVERY_MARGIN_S left (or none) drops its session and answers so.
        session, response = await self.start_episode(request, Owner(self._principal(context)))
        remaining = context.time_remaining()
        if remaining is not None and remaining < DELIVERY_MARGIN_S:
            self.end_session(session.id, "deadline_passed")
            raise DeadlineError(
                "the episode was solved too close to the call's deadline to answer; no session "
                "was kept: retry with a longer deadline"
            )
        return response

    @_answers_errors
    async def Act(self, request, context):
        session = self._store.get(request.session_id, Owner(self._principal(context)))
        return await self.step(session, request.observation)

    @_answers_errors
    async def EndEpisode(self, request, context):
        session = self._store.pop(request.session_id, Owner(self._principal(context)))
        async with session.lock:  # a step still in flight is counted
            planner = session.planner
            steps, replans = planner.step_count, planner.replans
        self._models.release(session.model)  # after its last step: its version may be unloaded
        event(SESSIONS, "session_ended", session=session.id, steps=steps, replans=replans,
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
                    session, started = await self.start_episode(
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
                    action = await self.step(live, request.observation.observation)
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
                self.end_session(session.id, "stream_closed")

    # -- the work shared by unary calls, the stream and the openpi listener (serving/openpi.py)

    async def start_episode(self, request: pb.StartEpisodeRequest, owner: Owner,
                            goal_field: str = "goal") -> tuple[Session, pb.StartEpisodeResponse]:
        await self._models.catch_up()
        model = self._models.get(request.model)
        bundle = model.bundle
        goal = self._vector(request.goal, goal_field, bundle.goal_dim, "goal_dim", bundle.env_id)
        config, seed = episode_config(request.options, bundle.planner_defaults)
        self._store.check_capacity(owner.principal)  # before the graph solve, a start's costly part
        self._models.hold(model)  # no await since get(): still current; a swap cannot unload it
        try:
            planner = await model.engine.start_episode(goal, config, seed)
            session = self._store.add(planner, owner, model)
        except BaseException:
            self._models.release(model)
            raise
        self._metrics.model(model.name).sessions_started.inc()
        event(SESSIONS, "session_started", session=session.id, owner=owner.principal,
              stream=owner.stream is not None, model=model.name, version=model.version,
              mode=config.mode, search=config.search, seed=seed, live=len(self._store))
        response = start_response(session.id, bundle.n_landmarks, planner.landmark_to_goal)
        response.model, response.version = model.name, model.version
        return session, response

    async def step(self, session: Session, observation, field: str = "observation") -> pb.ActResponse:
        started = time.perf_counter()
        model: ModelVersion = session.model
        bundle = model.bundle
        obs = self._vector(observation, field, bundle.obs_dim, "obs_dim", bundle.env_id)
        async with session.lock:
            planner = session.planner
            step = planner.step_count
            need = planner.prepare(obs)
            result = planner.complete(await model.engine.infer(need))
        response = act_response(result, step, bundle)
        metrics = self._metrics.model(model.name)
        metrics.steps.inc()
        if result.replanned:
            metrics.replans.inc()
        metrics.step_latency[result.replanned].observe(time.perf_counter() - started)
        return response

    def end_session(self, session_id: str, reason: str) -> None:
        session = self._store.discard(session_id)
        if session is not None:  # else EndEpisode or the TTL removed it first
            self._models.release(session.model)
            event(SESSIONS, "session_ended", session=session.id,
                  steps=session.planner.step_count, replans=session.planner.replans,
                  reason=reason)

    @staticmethod
    def _vector(values, field: str, dim: int, dim_name: str, env_id: str) -> np.ndarray:
        if len(values) != dim:
            raise InvalidRequestError(
                f"{field} has {len(values)} values, expected {dim} ({dim_name} of {env_id})"
            )
        vector = np.fromiter(values, np.float32, dim)
        if not np.isfinite(vector).all():
            bad = np.flatnonzero(~np.isfinite(vector))
            raise InvalidRequestError(
                f"{field}[{bad[0]}] is {vector[bad[0]]}, expected a finite number "
                f"({bad.size} of {dim} values are NaN or Inf)"
            )
        return vector

    async def _abort(self, context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
        code = status_of(exc)
        if code is None:
            event(logging.ERROR, "internal_error", exc, method=method, error=repr(exc))
            code, message = grpc.StatusCode.INTERNAL, f"internal error in {method}; see server log"
        else:
            message = str(exc)
            limited_event(logging.INFO, "request_error", method=method, code=code.name, message=message)
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
        "ListModels": (pb.ListModelsRequest, pb.ListModelsResponse),
        "ReloadModels": (pb.ReloadModelsRequest, pb.ReloadModelsResponse),
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
