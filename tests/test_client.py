"""The robot-side client against the real server in a subprocess."""

from __future__ import annotations

import random
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

import l3p.clients.client as client_mod
from l3p.clients.client import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PlannerClient,
    PlannerError,
    ModelInfo,
    ResourceExhausted,
    RetryPolicy,
    Unavailable,
    episode_options,
)
from l3p.clients.errors import translate
from l3p.core.bundle_format import read_manifest
from l3p.core.config import EPISODE_OPTIONS, OPTIONS
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos.mapping import MODE_ENUM, SEARCH_ENUM
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.local_server import LocalServer
from option_values import example, exclusions
from server_proc import serve

GOAL = [1.3, 0.75, 0.42]
OBS = np.linspace(-0.5, 0.5, 25)  # FetchPush obs_dim


@pytest.fixture(scope="module")
def target(push_bundle):
    with serve(push_bundle) as port:
        yield f"127.0.0.1:{port}"


@pytest.fixture
def client(target):
    with PlannerClient(target, timeout_s=5.0) as c:
        yield c


class _Sleeps:
    """Records the client's backoff sleeps instead of sleeping."""

    def __init__(self):
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


# --------------------------------------------------------------------------- happy paths


def test_model_info_describes_the_bundle(client, push_bundle):
    info = client.model_info()
    assert (info.env_id, info.obs_dim, info.goal_dim, info.action_dim) == ("FetchPush-v4", 25, 3, 4)
    assert info.n_landmarks == 8 and len(info.bundle_sha256) == 64
    assert info.provenance.get("untrained") is True
    # Every served default the wire carries, with the manifest's values (enums as names).
    assert list(info.defaults) == [f.name for f in pb.PlannerDefaults.DESCRIPTOR.fields]
    served = read_manifest(push_bundle)["planner"]
    for name, value in info.defaults.items():
        expected = info.n_landmarks if name == "n_landmarks" else served[name]
        assert value == pytest.approx(expected), name


def test_model_info_keeps_every_planner_default():
    """Built from the proto's fields: a field added to PlannerDefaults cannot be dropped."""
    fields = pb.PlannerDefaults.DESCRIPTOR.fields
    values = {name: example(name) for name in OPTIONS}  # every option of the table, off its default
    wire = {name: {"mode": MODE_ENUM, "search": SEARCH_ENUM}[name][v] if OPTIONS[name].kind == "choice" else v
            for name, v in values.items()}
    assert {"n_landmarks", *wire} == {f.name for f in fields}  # every field set here
    defaults = pb.PlannerDefaults(n_landmarks=7, **wire)
    info = ModelInfo.from_proto(pb.ModelInfo(defaults=defaults, provenance_json="{not json"))
    assert info.defaults == pytest.approx({"n_landmarks": 7, **values})
    assert info.provenance == {"raw": "{not json"}
    assert info.landmarks is None  # a server that sends none (older than the field)
    graph = ModelInfo.from_proto(pb.ModelInfo(n_landmarks=3, goal_dim=2, landmarks=[0, 1, 2, 3, 4, 5])).landmarks
    np.testing.assert_array_equal(graph, [[0, 1], [2, 3], [4, 5]])
    unset = ModelInfo.from_proto(pb.ModelInfo()).defaults
    assert unset["mode"] == "unspecified" and unset["search"] == "unspecified" and unset["prune_failed"] is False


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_episode_steps_and_ends(client, stream):
    open_episode = client.stream_episode if stream else client.episode
    with open_episode(GOAL, mode="l3p", seed=1) as ep:
        assert ep.session_id and ep.landmark_to_goal.shape == (8,)
        steps = [ep.act(OBS) for _ in range(4)]
    assert [s.step for s in steps] == [0, 1, 2, 3]
    for s in steps:
        assert s.action.shape == (4,) and np.all(np.abs(s.action) <= 1.0)
        assert s.subgoal.shape == (3,) and -1 <= s.subgoal_index < 8
        assert s.latency_s > 0
    assert steps[0].replanned  # the first step always plans
    summary = ep.end()  # idempotent after the with block
    assert summary.steps == 4 and summary.replans == sum(s.replanned for s in steps)
    with pytest.raises(NotFound):
        client.act(ep.session_id, OBS)


def test_same_seed_same_actions_unary_and_stream(client):
    def actions(open_episode):
        with open_episode(GOAL, mode="naive", seed=3, sample_subgoal=True) as ep:
            return np.stack([ep.act(OBS + 0.01 * i).action for i in range(3)])

    a = actions(client.episode)
    np.testing.assert_array_equal(a, actions(client.episode))
    np.testing.assert_allclose(a, actions(client.stream_episode), atol=1e-6)


# --------------------------------------------------------------------------- session cleanup


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
def test_episode_context_ends_the_session_on_exceptions(client, stream):
    open_episode = client.stream_episode if stream else client.episode
    with pytest.raises(RuntimeError, match="robot fell over"):
        with open_episode(GOAL) as ep:
            ep.act(OBS)
            session_id = ep.session_id
            raise RuntimeError("robot fell over")
    with pytest.raises(NotFound) as err:
        client.end_episode(session_id)
    assert session_id in err.value.message


# --------------------------------------------------------------------------- typed errors


def test_typed_errors_carry_the_server_message(client):
    with client.episode(GOAL) as ep:
        with pytest.raises(InvalidArgument) as err:
            ep.act(np.zeros(3))
        ep.act(OBS)  # a bad request does not break the session
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "observation" in err.value.message and "25" in err.value.message
    assert "observation" in str(err.value) and isinstance(err.value, PlannerError)

    with pytest.raises(InvalidArgument, match="observation"):
        with client.stream_episode(GOAL) as sep:
            sep.act(np.zeros(3))
    with pytest.raises(InvalidArgument, match="d_max"):  # the server checks what the client checks
        client.start_episode(GOAL, pb.EpisodeOptions(d_max=-1.0))
    with pytest.raises(NotFound, match="no-such-session"):
        client.act("no-such-session", OBS)


@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
@pytest.mark.parametrize("bad, message", [
    (np.r_[1e39, OBS[1:]], "observation[0] is inf"),  # finite in float64, not in float32 (the wire's)
    (np.zeros(3), "observation has 3 values"),
], ids=["beyond-float32", "wrong-length"])
def test_a_refused_observation_leaves_the_episode_usable(client, stream, bad, message):
    open_episode = client.stream_episode if stream else client.episode
    with open_episode(GOAL, mode="l3p", seed=1) as ep:
        first = ep.act(OBS)
        with pytest.raises(InvalidArgument, match=re.escape(message)):
            ep.act(bad)
        steps = [ep.act(OBS + 0.01 * i) for i in range(10)]
    assert first.step == 0 and len(steps) == 10
    for s in steps:
        assert s.action.shape == (4,) and np.all(np.isfinite(s.action)) and np.all(np.abs(s.action) <= 1.0)
    if stream:  # the server ended the refused stream: a new session took the episode on, re-planning once
        assert ep.reopens == 1 and [s.step for s in steps] == list(range(10)) and steps[0].replanned
    else:  # the session never saw the refused observation
        assert [s.step for s in steps] == list(range(1, 11))


def test_stream_observation_before_goal_is_failed_precondition(target):
    # The client API cannot send this; a raw stream checks the server's code reaches our type.
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        first = pb.ControlRequest(observation=pb.ActRequest(observation=OBS))
        with pytest.raises(grpc.RpcError) as raw:
            list(stub.Control(iter([first]), timeout=5))
    error = translate(raw.value, "Control")
    assert isinstance(error, FailedPrecondition) and error.message


@pytest.mark.parametrize("code, cls", [
    (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument),
    (grpc.StatusCode.NOT_FOUND, NotFound),
    (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, ResourceExhausted),
    (grpc.StatusCode.UNAVAILABLE, Unavailable),
    (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceeded),
    (grpc.StatusCode.INTERNAL, PlannerError),
])
def test_status_codes_map_to_error_types(code, cls):
    class FakeRpcError(grpc.RpcError):
        def code(self):
            return code

        def details(self):
            return "the server's words"

    error = translate(FakeRpcError(), "Act")
    assert type(error) is cls and error.code == code and error.message == "the server's words"
    assert str(error) == f"Act: {code.name}: the server's words"


# --------------------------------------------------------------------------- deadlines


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never answers: a hung server."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def test_deadline_exceeded_surfaces_clearly(silent_server, monkeypatch):
    # On loopback a live server often answers within even a 1 µs deadline, so a hung server
    # makes the tiny-timeout case deterministic.
    sleeps = _Sleeps()
    monkeypatch.setattr(time, "sleep", sleeps)
    with PlannerClient(silent_server, timeout_s=0.05) as c:
        with pytest.raises(DeadlineExceeded) as err:
            c.model_info()
        assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "0.05" in err.value.message and silent_server in err.value.message
        with pytest.raises(DeadlineExceeded):
            c.model_info(timeout=0.001)
        with pytest.raises(DeadlineExceeded, match="no 'started' reply"):
            with c.stream_episode(GOAL):
                pass
    assert sleeps.calls == []  # deadlines are not retried


# --------------------------------------------------------------------------- retries


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_retry_survives_a_server_restart(push_bundle):
    server = LocalServer(push_bundle).start()
    port = server.wait_ready()
    restarted = None
    try:
        with PlannerClient(f"127.0.0.1:{port}", retry=RetryPolicy(max_attempts=30, max_backoff_s=1.0)) as c, \
                PlannerClient(f"127.0.0.1:{port}", retry=None) as no_retry:
            sha = c.model_info().bundle_sha256
            no_retry.model_info()
            server.stop()

            with pytest.raises(Unavailable) as err:
                c.model_info(retry=False)
            assert err.value.code == grpc.StatusCode.UNAVAILABLE
            with pytest.raises(Unavailable):
                no_retry.model_info()
            with pytest.raises(Unavailable):  # Act is never retried, even with a policy
                c.act("any-session", OBS)

            # Restart on the same port without waiting: the retrying call bridges the gap.
            restarted = LocalServer(push_bundle, port=port).start()
            assert c.model_info().bundle_sha256 == sha
            assert restarted.wait_ready() == port
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()


def test_resume_carries_episodes_across_a_server_restart(push_bundle):
    """Unary (NOT_FOUND after the restart) and stream (UNAVAILABLE while down) episodes resume
    with a new session at the same observation; without resume the loss is raised."""
    server = LocalServer(push_bundle).start()
    port = server.wait_ready()
    restarted = None
    try:
        with PlannerClient(f"127.0.0.1:{port}", retry=RetryPolicy(max_attempts=30, max_backoff_s=1.0)) as c:
            unary = c.episode(GOAL, seed=1, resume=True).start()
            stream = c.stream_episode(GOAL, seed=1, resume=True).start()
            plain = c.episode(GOAL, seed=1).start()
            before = {ep.session_id for ep in (unary, stream)}
            for ep in (unary, stream, plain):
                assert [ep.act(OBS).step for _ in range(3)] == [0, 1, 2]
            server.proc.kill()
            server.proc.wait()  # gone, and its sessions with it
            restarted = LocalServer(push_bundle, port=port).start()
            assert restarted.wait_ready() == port
            with c.episode(GOAL, seed=1) as reference:
                fresh = reference.act(OBS)
            for ep in (unary, stream):
                step = ep.act(OBS)
                assert step.resumed and step.step == 0 and step.replanned  # one re-plan
                assert np.array_equal(step.action, fresh.action)  # same goal, options, observation
                assert ep.act(OBS).step == 1 and not ep.act(OBS).resumed
                assert ep.resumes == 1 and ep.session_id not in before
                ep.end()
            with pytest.raises(NotFound):
                plain.act(OBS)
    finally:
        server.stop()
        if restarted is not None:
            restarted.stop()


def test_a_server_down_for_long_is_logged_thinly(push_bundle, caplog):
    """Each step while the server is gone fails (the robot holds) and is counted; the log says so at the
    1st, 2nd, 4th and 8th loss in a row, not at every step."""
    server = LocalServer(push_bundle).start()
    port = server.wait_ready()
    try:
        with PlannerClient(f"127.0.0.1:{port}", retry=RetryPolicy(max_attempts=1)) as c:
            episodes = (c.episode(GOAL, seed=1, resume=True).start(), c.stream_episode(GOAL, seed=1, resume=True).start())
            for ep in episodes:
                ep.act(OBS)
            server.proc.kill()
            server.proc.wait()
            for ep in episodes:
                caplog.clear()
                for _ in range(9):
                    with pytest.raises(PlannerError):
                        ep.act(OBS)
                lost = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
                assert ep.lost_in_a_row == 9
                assert [m.rsplit("(", 1)[1] for m in lost] == ["1 in a row)", "2 in a row)", "4 in a row)", "8 in a row)"]
    finally:
        server.stop()


def test_act_is_not_retried(monkeypatch):
    sleeps = _Sleeps()
    monkeypatch.setattr(time, "sleep", sleeps)
    with PlannerClient(f"127.0.0.1:{_free_port()}", retry=RetryPolicy(max_attempts=4)) as c:
        with pytest.raises(Unavailable):
            c.act("session", OBS)
        assert sleeps.calls == []
        with pytest.raises(Unavailable, match="gave up after 4 attempts"):
            c.model_info()
        assert len(sleeps.calls) == 3


def test_backoff_grows_with_jitter_and_caps():
    policy = RetryPolicy(max_attempts=10, initial_backoff_s=0.1, max_backoff_s=1.0, multiplier=2.0)
    rng = random.Random(0)
    for retry, cap in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        waits = [policy.backoff_s(retry, rng) for _ in range(50)]
        assert all(cap / 2 <= w <= cap for w in waits)
        assert len(set(waits)) > 1  # jittered
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


# --------------------------------------------------------------------------- options, imports


def test_episode_options_leave_unset_fields_unset():
    opts = episode_options("naive", seed=0, d_max=12.0)
    assert opts.mode == pb.PLANNER_MODE_NAIVE
    assert opts.HasField("seed") and opts.seed == 0 and opts.d_max == 12.0
    assert not opts.HasField("temperature") and not opts.HasField("sample_subgoal")
    assert not opts.HasField("prune_failed") and episode_options(prune_failed=False).HasField("prune_failed")
    assert episode_options().mode == pb.PLANNER_MODE_UNSPECIFIED
    assert episode_options(search="expectation").search == pb.SEARCH_KIND_EXPECTATION
    opts = episode_options(temperature=np.float32(0.5), sample_subgoal=True, local_horizon=0)
    assert (opts.temperature, opts.sample_subgoal, opts.local_horizon) == (0.5, True, 0.0)


def test_episode_options_carry_every_per_episode_option():
    """EpisodeOptions is mode, seed and exactly the per-episode options of the option table."""
    fields = [f.name for f in pb.EpisodeOptions.DESCRIPTOR.fields]
    assert sorted(fields) == sorted(["mode", "seed", *EPISODE_OPTIONS])
    for name in EPISODE_OPTIONS:
        opts = episode_options("l3p", seed=5, **{name: example(name)})
        value = getattr(opts, name)
        if OPTIONS[name].kind == "choice":
            assert value == SEARCH_ENUM[example(name)]
        else:
            assert opts.HasField(name) and value == pytest.approx(example(name)), name
        assert (opts.mode, opts.seed) == (pb.PLANNER_MODE_L3P, 5)
    for name in EPISODE_OPTIONS:  # checked here as the server would: they do nothing there
        for mode in {"l3p", "naive", "policy"} - set(OPTIONS[name].modes):
            with pytest.raises(ValueError, match=f"{name} applies to mode {' or '.join(OPTIONS[name].modes)} only, "
                                                 f"not {mode}"):
                episode_options(mode, **{name: example(name)})
    for on, dead in exclusions():  # a setting that does nothing beside another one given
        if dead in EPISODE_OPTIONS:
            with pytest.raises(ValueError, match=f"{on}=true makes {dead} do nothing; drop one"):
                episode_options(**{on: True, dead: example(dead)})


@pytest.mark.parametrize("options, match", [
    ({"mode": "greedy"}, r"mode must be one of \('l3p', 'naive', 'policy'\), got 'greedy'"),
    ({"search": "dijkstra"}, "search must be one of"),
    ({"d_max": -1.0}, "d_max must be a finite number > 0, got -1.0"),
    ({"d_max": float("nan")}, "d_max must be a finite number"),
    ({"local_horizon": -0.5}, "local_horizon must be a finite number >= 0"),
    ({"temperature": 1e-9}, "temperature must be >= 1e-06"),
    ({"sample_subgoal": 1}, "sample_subgoal must be a bool, got 1"),
    ({"prune_failed": "yes"}, "prune_failed must be a bool"),
    ({"seed": -1}, r"seed must be an integer in \[0, 2\*\*64\)"),
    ({"seed": 1.5}, "seed must be an integer"),
])
def test_episode_options_are_checked_like_the_server(options, match):
    with pytest.raises(ValueError, match=match):
        episode_options(**options)


def test_episode_options_ranges_are_the_planner_options():
    for name in EPISODE_OPTIONS:
        with pytest.raises(ValueError, match=re.escape(f"{name} must be {OPTIONS[name].expected}")):
            episode_options(**{name: "not a value"})
    with pytest.raises(TypeError, match="search_iterations"):  # a bundle default, not per episode
        episode_options(search_iterations=3)
    with pytest.raises(TypeError, match="unknown episode option"):
        episode_options(dmax=3.0)


def test_client_module_needs_no_torch_or_gymnasium():
    code = ("import sys; import l3p.clients.client; "
            "bad = [m for m in ('torch', 'gymnasium', 'mujoco', 'onnxruntime') if m in sys.modules]; "
            "sys.exit(repr(bad) if bad else 0)")
    root = Path(client_mod.__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root)
    assert result.returncode == 0, result.stderr
