"""End-to-end tests: the real server (`python -m l3p.serving`) in a subprocess, over gRPC.

The bundle comes from untrained networks, so episodes run against a stand-in world: the
observation's first goal_dim entries are the gripper position and move by 0.05 x action.
Untrained distances are all ~0.7 steps, so the goal always wins an argmin; to exercise landmark
subgoals (counter, exclusion) the EXPLORE options sample subgoals at a high temperature.
"""

from __future__ import annotations

import json
import queue
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from prometheus_client.parser import text_string_to_metric_families

from l3p.serving.local_server import LocalServer
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.protos.mapping import MODE_ENUM, SEARCH_ENUM
from l3p.serving.bundle import load_bundle
from l3p.core import OPTIONS, EpisodePlanner, PlannerConfig

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 20  # seconds, per call: generous for a loaded 2-core machine
MAX_SESSIONS = 40
OBS_DIM, GOAL_DIM = 10, 3  # FetchReach-v4
ENV = "FetchReach-v4"
HOME = np.array([1.34, 0.75, 0.53], np.float32)  # the Fetch gripper's start, roughly


def explore(seed: int) -> pb.EpisodeOptions:
    return pb.EpisodeOptions(local_horizon=0.0, sample_subgoal=True, temperature=50.0, seed=seed)


def initial(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = rng.normal(0.0, 0.05, OBS_DIM).astype(np.float32)
    obs[:GOAL_DIM] += HOME
    goal = (HOME + rng.uniform(-0.15, 0.15, GOAL_DIM)).astype(np.float32)
    return obs, goal


def advance(obs: np.ndarray, action) -> np.ndarray:
    obs = obs.copy()
    obs[:GOAL_DIM] += 0.05 * np.asarray(action[:GOAL_DIM], np.float32)
    return obs


def run_unary(stub, seed: int, options=None, steps: int = 50):
    """One episode over StartEpisode/Act/EndEpisode: (StartEpisodeResponse, [ActResponse])."""
    obs, goal = initial(seed)
    started = stub.StartEpisode(pb.StartEpisodeRequest(goal=goal, options=options), timeout=TIMEOUT)
    responses = []
    for _ in range(steps):
        request = pb.ActRequest(session_id=started.session_id, observation=obs)
        responses.append(stub.Act(request, timeout=TIMEOUT))
        obs = advance(obs, responses[-1].action)
    ended = stub.EndEpisode(pb.EndEpisodeRequest(session_id=started.session_id), timeout=TIMEOUT)
    assert (ended.steps, ended.replans) == (steps, sum(r.replanned for r in responses))
    return started, responses


class StreamEpisode:
    """A Control stream driven one message at a time (ping-pong, like a robot's loop)."""

    def __init__(self, stub, timeout: float = TIMEOUT):
        self._requests = queue.SimpleQueue()
        self.call = stub.Control(iter(self._requests.get, None), timeout=timeout)

    def start(self, goal, options=None) -> pb.StartEpisodeResponse:
        self._requests.put(pb.ControlRequest(start=pb.StartEpisodeRequest(goal=goal, options=options)))
        return next(self.call).started

    def act(self, obs) -> pb.ActResponse:
        self._requests.put(pb.ControlRequest(observation=pb.ActRequest(observation=obs)))
        return next(self.call).action

    def send(self, request: pb.ControlRequest) -> pb.ControlResponse:
        self._requests.put(request)
        return next(self.call)

    def close(self) -> None:
        """Half-closes; the server ends the stream with OK."""
        self._requests.put(None)
        assert list(self.call) == []


def run_stream(stub, seed: int, options=None, steps: int = 50):
    obs, goal = initial(seed)
    stream = StreamEpisode(stub)
    started = stream.start(goal, options)
    responses = []
    for _ in range(steps):
        responses.append(stream.act(obs))
        obs = advance(obs, responses[-1].action)
    stream.close()
    return started, responses


def actions(responses) -> list[list[float]]:
    return [list(r.action) for r in responses]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Served:
    process: LocalServer
    channel: grpc.Channel
    stub: pb_grpc.PlannerStub
    metrics_url: str

    def metric(self, name: str, labels: dict | None = None) -> float:
        text = urllib.request.urlopen(self.metrics_url, timeout=TIMEOUT).read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and sample.labels == (labels or {}):
                    return sample.value
        raise KeyError(name)

    def live_sessions(self) -> int:
        return int(self.metric("l3p_sessions_live"))


def wait_until(predicate, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def serve(bundle: Path, *args: str):
    metrics_port = free_port()
    extra = ["--metrics-port", str(metrics_port), *args]
    with LocalServer(bundle, extra_args=extra) as process:
        with grpc.insecure_channel(process.target) as channel:
            yield Served(process, channel, pb_grpc.PlannerStub(channel),
                         f"http://127.0.0.1:{metrics_port}/metrics")


@pytest.fixture(scope="module")
def server(untrained_bundle):
    yield from serve(untrained_bundle, "--max-sessions", str(MAX_SESSIONS), "--reflection")


@pytest.fixture(scope="module")
def stub(server):
    return server.stub


# ------------------------------------------------------------------------------ model info


def test_model_info_matches_the_manifest(stub, untrained_bundle):
    manifest = json.loads((untrained_bundle / "manifest.json").read_text())
    info = stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=TIMEOUT)
    assert info.env_id == manifest["env_id"]
    assert (info.obs_dim, info.goal_dim, info.action_dim) == tuple(
        manifest["dims"][k] for k in ("obs", "goal", "action")
    )
    assert list(info.action_low) == manifest["action_low"]
    assert list(info.action_high) == manifest["action_high"]
    assert info.n_landmarks == info.defaults.n_landmarks == manifest["n_landmarks"]
    np.testing.assert_array_equal(np.reshape(info.landmarks, (info.n_landmarks, info.goal_dim)),
                                  load_bundle(untrained_bundle).landmarks)
    assert info.format_version == manifest["format_version"]
    assert info.bundle_sha256 == load_bundle(untrained_bundle).sha256
    assert info.gamma == pytest.approx(manifest["gamma"])
    planner = manifest["planner"]
    enums = {"mode": MODE_ENUM, "search": SEARCH_ENUM}
    for name in OPTIONS:  # every option of the table is a default the proto carries, as the manifest serves it
        served = enums[name][planner[name]] if name in enums else planner[name]
        assert getattr(info.defaults, name) == pytest.approx(served), name
    assert {field.name for field in pb.PlannerDefaults.DESCRIPTOR.fields} == {"n_landmarks", *OPTIONS}
    assert json.loads(info.provenance_json) == manifest["provenance"]


# ------------------------------------------------------------------------ episodes, Algorithm 1


def check_episode(responses, steps: int = 50) -> None:
    low, high = np.full(4, -1.0), np.full(4, 1.0)  # FetchReach's action bounds
    assert [r.step for r in responses] == list(range(steps))
    for r in responses:
        action = np.array(r.action)
        assert action.shape == (4,) and np.isfinite(action).all()
        assert (low <= action).all() and (action <= high).all()
        assert len(r.subgoal) == GOAL_DIM and np.isfinite(r.subgoal).all()


def test_a_full_episode_over_unary_calls(stub):
    started, responses = run_unary(stub, seed=1)
    assert started.n_landmarks == 16 and len(started.landmark_to_goal) == 16
    check_episode(responses)


def test_a_full_episode_over_the_stream_matches_unary(stub):
    _, streamed = run_stream(stub, seed=1)
    check_episode(streamed)
    _, unary = run_unary(stub, seed=1)
    assert actions(streamed) == actions(unary)


def check_algorithm_1(responses) -> tuple[int, int]:
    """Asserts the counter and exclusion rules; (landmark picks, exclusions exercised)."""
    landmark_picks = exclusions = 0
    replaced = None  # the subgoal the next re-plan replaces
    i = 0
    while i < len(responses):
        plan = responses[i]
        assert plan.replanned, f"step {i} should re-plan"
        if replaced is not None and replaced != -1:
            assert plan.subgoal_index != replaced, f"step {i} re-picked landmark {replaced}"
            exclusions += 1
        landmark_picks += plan.subgoal_index != -1
        k = plan.counter
        assert k >= 1  # round(D) + counter_extra
        for j, follow in enumerate(responses[i + 1 : i + 1 + k], start=1):
            assert not follow.replanned
            assert follow.subgoal_index == plan.subgoal_index
            assert list(follow.subgoal) == list(plan.subgoal)
            assert follow.counter == k - j
            assert follow.estimated_distance == 0
        replaced = plan.subgoal_index
        i += k + 1
    return landmark_picks, exclusions


def test_l3p_keeps_subgoals_for_counter_steps_and_excludes_the_previous_one(stub):
    totals = np.zeros(2, int)
    for seed in range(3):
        _, responses = run_unary(stub, seed=seed, options=explore(seed))
        totals += check_algorithm_1(responses)
    landmark_picks, exclusions = totals
    assert landmark_picks >= 10 and exclusions >= 10  # the rules were exercised, not vacuous

    _, default = run_unary(stub, seed=0)  # bundle defaults: untrained D puts the goal in reach
    check_algorithm_1(default)


def test_policy_mode_never_replans(stub):
    _, responses = run_unary(stub, seed=2, options=pb.EpisodeOptions(mode=pb.PLANNER_MODE_POLICY))
    assert not any(r.replanned for r in responses)
    assert {(r.subgoal_index, r.counter) for r in responses} == {(-1, 0)}


def test_naive_mode_replans_every_step(stub):
    options = pb.EpisodeOptions(mode=pb.PLANNER_MODE_NAIVE, sample_subgoal=True, temperature=50.0, seed=4,
                                local_horizon=0.0)  # naive keeps the local horizon: untrained D is ~0.7
    _, responses = run_unary(stub, seed=2, options=options)
    assert all(r.replanned for r in responses)
    assert {r.counter for r in responses} == {0}
    indices = [r.subgoal_index for r in responses]  # no exclusion: repeats are allowed
    assert len(set(indices)) > 1


def test_identical_seeds_give_identical_actions(stub):
    first = run_unary(stub, seed=5, options=explore(11))[1]
    again = run_unary(stub, seed=5, options=explore(11))[1]
    other = run_unary(stub, seed=5, options=explore(12))[1]
    assert actions(first) == actions(again)
    assert [r.subgoal_index for r in first] == [r.subgoal_index for r in again]
    assert [r.subgoal_index for r in first] != [r.subgoal_index for r in other]


@pytest.mark.parametrize("mode", [pb.PLANNER_MODE_L3P, pb.PLANNER_MODE_POLICY])
def test_action_scale_scales_the_actors_action_and_the_bounds_still_hold(stub, mode):
    def first_action(**scale):
        options = pb.EpisodeOptions(mode=mode, seed=3, **scale)
        return np.array(run_unary(stub, seed=3, options=options, steps=1)[1][0].action)

    learned = first_action()
    assert 0 < np.abs(learned).max() < 0.9  # the untrained actor's action: inside the bounds
    np.testing.assert_allclose(first_action(action_scale=0.5), 0.5 * learned, rtol=1e-6, atol=1e-7)
    loud = first_action(action_scale=1000.0)  # far past the bounds: clipped to FetchReach's +-1
    np.testing.assert_array_equal(loud, np.clip(np.float32(1000.0) * learned.astype(np.float32), -1, 1))
    assert set(np.abs(loud[np.abs(learned) > 1e-2])) == {1.0}
    with pytest.raises(grpc.RpcError) as err:
        first_action(action_scale=0.0)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "action_scale must be a finite number > 0, got 0.0" in err.value.details()


@pytest.mark.parametrize("prune_failed", [False, True])
def test_served_actions_equal_the_in_process_planner(stub, untrained_bundle, prune_failed):
    options = explore(5)
    if prune_failed:
        options.prune_failed = True
    started, served = run_unary(stub, seed=3, options=options)

    bundle = load_bundle(untrained_bundle)
    config = bundle.planner_defaults.replace(local_horizon=0.0, sample_subgoal=True, temperature=50.0,
                                             prune_failed=prune_failed)
    obs, goal = initial(3)
    planner = EpisodePlanner(bundle.landmarks, goal, bundle.value_fn, config, seed=5)
    np.testing.assert_allclose(started.landmark_to_goal, planner.landmark_to_goal, rtol=1e-6)
    for response in served:
        step = planner.step(obs, bundle.distance_fn, bundle.policy_fn)
        np.testing.assert_allclose(response.action, step.action, rtol=0, atol=1e-6)
        assert (response.subgoal_index, response.replanned, response.counter) == (
            step.subgoal_index, step.replanned, step.counter,
        )
        obs = advance(obs, step.action)
    # The option reached the served planner: an untrained D puts every landmark under one step
    # away, so with prune_failed ("already there") no landmark is ever a candidate.
    assert ({r.subgoal_index for r in served if r.replanned} == {-1}) == prune_failed


def test_concurrent_sessions_match_the_same_episodes_one_by_one(stub):
    # 24 unary episodes and 8 streams at once (each open stream holds one of 16 workers).
    episodes = [(run_unary if i < 24 else run_stream, i) for i in range(32)]

    def play(episode):
        run, seed = episode
        return actions(run(stub, seed=seed, options=explore(seed), steps=20)[1])

    with futures.ThreadPoolExecutor(len(episodes)) as pool:
        concurrent = list(pool.map(play, episodes))
    assert concurrent == [play(episode) for episode in episodes]


# ------------------------------------------------------------------------------ error model


def rpc_error(call, request) -> grpc.RpcError:
    """The error status a call answers with (a stream's arrives when it is read)."""
    with pytest.raises(grpc.RpcError) as error:
        result = call(request, timeout=TIMEOUT)
        if isinstance(result, grpc.Call):
            list(result)
    return error.value


@pytest.fixture(scope="module")
def bystander(stub):
    """A session that must stay usable whatever other clients do wrong."""
    obs, goal = initial(99)
    session_id = stub.StartEpisode(pb.StartEpisodeRequest(goal=goal), timeout=TIMEOUT).session_id
    yield session_id, obs
    stub.EndEpisode(pb.EndEpisodeRequest(session_id=session_id), timeout=TIMEOUT)


@pytest.fixture
def undisturbed(stub, bystander):
    yield
    session_id, obs = bystander
    response = stub.Act(pb.ActRequest(session_id=session_id, observation=obs), timeout=TIMEOUT)
    assert np.isfinite(response.action).all()


def start(goal=None, **options) -> pb.StartEpisodeRequest:
    goal = initial(0)[1] if goal is None else goal
    return pb.StartEpisodeRequest(goal=goal, options=pb.EpisodeOptions(**options))


def config_error(**override) -> str:
    """The planner core's own validation message for an override."""
    with pytest.raises(ValueError) as error:
        PlannerConfig().replace(**override)
    return f"options.{error.value}"


@pytest.mark.usefixtures("undisturbed")
class TestErrors:
    INVALID = grpc.StatusCode.INVALID_ARGUMENT

    @pytest.fixture
    def session_id(self, stub):
        session_id = stub.StartEpisode(start(), timeout=TIMEOUT).session_id
        yield session_id
        try:
            stub.EndEpisode(pb.EndEpisodeRequest(session_id=session_id), timeout=TIMEOUT)
        except grpc.RpcError:  # the test ended it already
            pass

    @pytest.mark.parametrize(
        "observation, message",
        [
            ([0.0] * 7, f"observation has 7 values, expected 10 (obs_dim of {ENV})"),
            ([0.0] * 11, f"observation has 11 values, expected 10 (obs_dim of {ENV})"),
            ([0.0, 0.0, float("nan")] + [0.0] * 7, "observation[2] is nan, expected a finite number"),
            ([float("inf")] + [0.0] * 9, "observation[0] is inf, expected a finite number"),
        ],
    )
    def test_bad_observation(self, stub, session_id, observation, message):
        error = rpc_error(stub.Act, pb.ActRequest(session_id=session_id, observation=observation))
        assert error.code() == self.INVALID and message in error.details()
        good = pb.ActRequest(session_id=session_id, observation=initial(0)[0])
        assert stub.Act(good, timeout=TIMEOUT).step == 0  # the bad call did not advance the episode

    @pytest.mark.parametrize(
        "request_, message",
        [
            (start(goal=[1.0, 2.0]), f"goal has 2 values, expected 3 (goal_dim of {ENV})"),
            (start(goal=[1.0, float("-inf"), 2.0]), "goal[1] is -inf, expected a finite number"),
            (start(mode=7), "options.mode is 7, not a known PlannerMode; expected one of "
                            "PLANNER_MODE_L3P, PLANNER_MODE_NAIVE, PLANNER_MODE_POLICY"),
            (start(search=9), "options.search is 9, not a known SearchKind"),
            (start(d_max=-1.0), config_error(d_max=-1.0)),
            (start(temperature=0.0), config_error(temperature=0.0)),
            (start(temperature=float("nan")), "options.temperature must be a finite number > 0"),
            (start(local_horizon=-2.0), config_error(local_horizon=-2.0)),
            (start(next_hop=True, follow_edges=True), "options.next_hop=true makes follow_edges do nothing; drop one"),
            (start(mode=pb.PLANNER_MODE_NAIVE, next_hop=True), "options.next_hop applies to mode l3p only, not naive"),
        ],
    )
    def test_bad_start(self, stub, server, request_, message):
        live = server.live_sessions()
        for error in (rpc_error(stub.StartEpisode, request_),
                      rpc_error(stub.Control, iter([pb.ControlRequest(start=request_)]))):
            assert error.code() == self.INVALID
            assert message in error.details(), error.details()
        assert server.live_sessions() == live

    def test_unknown_ended_or_missing_session(self, stub, session_id):
        obs = initial(0)[0]
        for unknown in ("no-such-session", ""):
            error = rpc_error(stub.Act, pb.ActRequest(session_id=unknown, observation=obs))
            assert error.code() == grpc.StatusCode.NOT_FOUND
            assert f"session_id {unknown!r} is not a live session" in error.details()
        stub.EndEpisode(pb.EndEpisodeRequest(session_id=session_id), timeout=TIMEOUT)
        for call, request in ((stub.Act, pb.ActRequest(session_id=session_id, observation=obs)),
                              (stub.EndEpisode, pb.EndEpisodeRequest(session_id=session_id))):
            error = rpc_error(call, request)
            assert error.code() == grpc.StatusCode.NOT_FOUND
            assert "unknown, ended, or idle" in error.details()

    def test_a_stream_session_is_not_reachable_by_unary_calls(self, stub):
        stream = StreamEpisode(stub)
        session_id = stream.start(initial(0)[1]).session_id
        obs = initial(0)[0]
        for call, request in ((stub.Act, pb.ActRequest(session_id=session_id, observation=obs)),
                              (stub.EndEpisode, pb.EndEpisodeRequest(session_id=session_id))):
            error = rpc_error(call, request)
            assert error.code() == grpc.StatusCode.NOT_FOUND
            assert f"session_id {session_id!r} is not a live session" in error.details()
        assert stream.act(obs).step == 0  # the stream's episode is untouched
        stream.close()

    def test_observation_before_start_on_a_stream(self, stub):
        first = pb.ControlRequest(observation=pb.ActRequest(observation=initial(0)[0]))
        error = rpc_error(stub.Control, iter([first]))
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "'observation' before 'start'" in error.details()

    def test_second_start_on_a_stream(self, stub, server):
        live = server.live_sessions()
        stream = StreamEpisode(stub)
        stream.start(initial(0)[1])
        assert server.live_sessions() == live + 1
        with pytest.raises(grpc.RpcError) as error:
            stream.send(pb.ControlRequest(start=start()))
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "a second 'start' on this Control stream" in error.value.details()
        wait_until(lambda: server.live_sessions() == live, "the stream's session to be freed")

    def test_bad_observation_ends_the_stream_and_its_session(self, stub, server):
        live = server.live_sessions()
        stream = StreamEpisode(stub)
        stream.start(initial(0)[1])
        with pytest.raises(grpc.RpcError) as error:
            stream.act([0.0] * 3)
        assert error.value.code() == self.INVALID
        assert "observation has 3 values, expected 10" in error.value.details()
        wait_until(lambda: server.live_sessions() == live, "the stream's session to be freed")

    def test_session_limit(self, stub, server):
        opened = []
        try:
            while len(opened) <= MAX_SESSIONS:
                try:
                    opened.append(stub.StartEpisode(start(), timeout=TIMEOUT).session_id)
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    assert f"session limit reached: {MAX_SESSIONS} live sessions" in error.details()
                    break
            else:
                pytest.fail(f"{len(opened)} sessions started, more than --max-sessions")
            assert server.live_sessions() == MAX_SESSIONS
            obs = initial(0)[0]  # sessions already open keep working
            assert stub.Act(pb.ActRequest(session_id=opened[0], observation=obs), timeout=TIMEOUT)
        finally:
            for session_id in opened:
                stub.EndEpisode(pb.EndEpisodeRequest(session_id=session_id), timeout=TIMEOUT)
        stub.EndEpisode(pb.EndEpisodeRequest(
            session_id=stub.StartEpisode(start(), timeout=TIMEOUT).session_id), timeout=TIMEOUT)

    def test_oversized_message(self, stub):
        error = rpc_error(stub.Act, pb.ActRequest(session_id="x", observation=[0.0] * 20_000))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "larger than max" in error.details()


# -------------------------------------------------------------------- sessions never leak


@pytest.mark.parametrize("drop", ["cancel", "close_channel"])
def test_a_dropped_stream_leaves_no_session(server, drop):
    live = server.live_sessions()
    channel = grpc.insecure_channel(server.process.target)
    stream = StreamEpisode(pb_grpc.PlannerStub(channel))
    obs, goal = initial(7)
    stream.start(goal)
    for _ in range(5):
        obs = advance(obs, stream.act(obs).action)
    assert server.live_sessions() == live + 1
    if drop == "cancel":
        stream.call.cancel()
    channel.close()
    wait_until(lambda: server.live_sessions() == live, "the dropped stream's session to be freed")


@pytest.fixture(scope="module")
def short_ttl_server(untrained_bundle):
    yield from serve(untrained_bundle, "--session-ttl", "1")


def test_idle_sessions_expire(short_ttl_server):
    served = short_ttl_server
    obs, goal = initial(8)
    session_id = served.stub.StartEpisode(pb.StartEpisodeRequest(goal=goal), timeout=TIMEOUT).session_id
    served.stub.Act(pb.ActRequest(session_id=session_id, observation=obs), timeout=TIMEOUT)
    wait_until(lambda: served.metric("l3p_sessions_expired_total") >= 1, "the session to expire")
    assert served.live_sessions() == 0
    error = rpc_error(served.stub.Act, pb.ActRequest(session_id=session_id, observation=obs))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "idle for more than 1 s (expired)" in error.details()


def test_a_busy_stream_outlives_the_idle_ttl(short_ttl_server):
    """Each observation on a stream marks its session used, as an Act does: only idleness expires."""
    served = short_ttl_server
    expired = served.metric("l3p_sessions_expired_total")
    obs, goal = initial(9)
    stream = StreamEpisode(served.stub)
    stream.start(goal)
    for _ in range(10):  # 2.5 s of steps, each well within the 1 s TTL of the last
        obs = advance(obs, stream.act(obs).action)
        time.sleep(0.25)
    assert served.live_sessions() == 1
    assert served.metric("l3p_sessions_expired_total") == expired
    stream.close()


def test_streams_cost_no_thread_and_past_the_session_limit_are_refused_not_stalled(untrained_bundle):
    """120 open streams (the threaded server allowed 60 with its 64 workers) are all served; one
    past --max-sessions is refused at once, and unary calls and the open streams carry on."""
    for served in serve(untrained_bundle, "--max-sessions", "121"):
        obs, goal = initial(3)
        open_streams = [StreamEpisode(served.stub) for _ in range(120)]
        for stream in open_streams:
            stream.start(goal)
        assert all(np.isfinite(stream.act(obs).action).all() for stream in open_streams)
        run_unary(served.stub, seed=4, steps=3)  # the 121st session, ended
        blocker = StreamEpisode(served.stub)
        blocker.start(goal)
        extra = StreamEpisode(served.stub)
        with pytest.raises(grpc.RpcError) as refused_call:
            extra.start(goal)
        assert refused_call.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "session limit reached: 121 live sessions" in refused_call.value.details()
        assert all(np.isfinite(stream.act(obs).action).all() for stream in open_streams)
        blocker.close()  # a freed session is usable again
        again = StreamEpisode(served.stub)
        assert again.start(goal).session_id
        again.close()
        for stream in open_streams:
            stream.close()
        wait_until(lambda: served.live_sessions() == 0, "every stream's session to be freed")


def test_a_server_started_by_local_server_exits_when_its_parent_is_killed(untrained_bundle, tmp_path):
    """No orphaned servers: SIGKILL the supervising process and its server shuts down. (Run from
    outside the source tree: the installed package is all it needs.)"""
    supervisor = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from l3p.serving.local_server import LocalServer\n"
         "server = LocalServer(sys.argv[1]).start()\n"
         "server.wait_ready()\n"
         "print(server.proc.pid, flush=True)\n"
         "time.sleep(120)\n",
         str(untrained_bundle)],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True,
    )
    server_pid = int(supervisor.stdout.readline())
    supervisor.kill()
    supervisor.wait(timeout=10)

    def gone() -> bool:
        try:
            with open(f"/proc/{server_pid}/stat") as f:
                return f.read().split()[2] == "Z"  # exited, not yet reaped
        except FileNotFoundError:
            return True

    wait_until(gone, "the orphaned server to exit")


# ------------------------------------------------------------- health, reflection, shutdown


def test_reflection_lists_the_services(stub, server):
    database = ProtoReflectionDescriptorDatabase(server.channel)
    services = set(database.get_services())
    assert {"l3p.v1.Planner", "grpc.health.v1.Health"} <= services
    symbol = database.FindFileContainingSymbol("l3p.v1.Planner")
    assert symbol.name == "l3p/protos/l3p_planner.proto"  # its import path in the l3p package


def refused(stub) -> bool:
    try:
        stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=3)
        return False
    except grpc.RpcError as error:
        # A call racing gRPC core's shutdown can go unanswered until its deadline (grpc/grpc#10418);
        # a client holds and calls again, and the next call must be refused.
        if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return False
        # CANCELLED: a call that reached the server just as it stopped taking new ones.
        assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        return True


def test_health_goes_not_serving_on_sigterm_and_the_stream_in_flight_finishes(untrained_bundle):
    check = health_pb2.HealthCheckRequest
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    with LocalServer(untrained_bundle, extra_args=["--shutdown-grace", "60", "--log-level", "debug"]) as process:
        channel = grpc.insecure_channel(process.target)
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "l3p.v1.Planner"):
            assert health.Check(check(service=service), timeout=TIMEOUT).status == serving
        watch = health.Watch(check(service="l3p.v1.Planner"), timeout=60)
        assert next(watch).status == serving

        stub = pb_grpc.PlannerStub(channel)
        obs, goal = initial(9)
        stream = StreamEpisode(stub, timeout=60)
        stream.start(goal)
        responses = [stream.act(obs)]

        process.proc.send_signal(signal.SIGTERM)
        assert next(watch).status == not_serving
        watch.cancel()  # a watch is a call in flight too; the server would wait for it
        wait_until(lambda: refused(stub), "new calls to be refused")

        while len(responses) < 50:  # ...while the episode in flight carries on to its end
            obs = advance(obs, responses[-1].action)
            responses.append(stream.act(obs))
        stream.close()
        check_episode(responses)

        assert process.proc.wait(timeout=30) == 0
        # gRPC's C core writes its own (non-JSON) lines, e.g. a poller notice at process exit, and
        # grpc's Python logger its own events (a health Watch cancelled at shutdown): the server's only.
        lines = [json.loads(line) for line in process.stderr_tail(40).splitlines() if line.startswith("{")]
        events = [line["event"] for line in lines if line["logger"].startswith("l3p")]
        assert events[events.index("shutting_down"):] == ["shutting_down", "session_ended", "stopped"]
        channel.close()


# --------------------------------------------------------------------------- broken bundles


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("missing file", "actor.onnx is missing"),
        ("checksum mismatch", "value.onnx: sha256"),
        ("bad manifest", "'format_version' is not 1"),
    ],
)
def test_a_broken_bundle_exits_with_one_line(untrained_bundle, tmp_path, breakage, message):
    broken = Path(shutil.copytree(untrained_bundle, tmp_path / "broken"))
    if breakage == "missing file":
        (broken / "actor.onnx").unlink()
    elif breakage == "checksum mismatch":
        with open(broken / "value.onnx", "ab") as file:
            file.write(b"\0")
    else:
        manifest = json.loads((broken / "manifest.json").read_text())
        manifest["format_version"] = 99
        (broken / "manifest.json").write_text(json.dumps(manifest))
    result = subprocess.run(
        [sys.executable, "-m", "l3p.serving", "--bundle", str(broken), "--port", "0"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert result.returncode != 0
    assert "L3P_SERVER_READY" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("l3p serve: error: ") and message in lines[0]
