"""The robot-side client against the real server in a subprocess."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
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
    ResourceExhausted,
    RetryPolicy,
    Unavailable,
    episode_options,
)
from l3p.serving.local_server import LocalServer
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


def test_model_info_describes_the_bundle(client):
    info = client.model_info()
    assert (info.env_id, info.obs_dim, info.goal_dim, info.action_dim) == ("FetchPush-v4", 25, 3, 4)
    assert info.n_landmarks == 8 and len(info.bundle_sha256) == 64
    assert info.defaults["mode"] == "l3p" and info.defaults["search"] in ("soft", "hard")
    assert info.provenance.get("untrained") is True


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
    with pytest.raises(InvalidArgument, match="d_max"):
        client.episode(GOAL, d_max=-1.0).start()
    with pytest.raises(NotFound, match="no-such-session"):
        client.act("no-such-session", OBS)


def test_stream_observation_before_goal_is_failed_precondition(target):
    # The client API cannot send this; a raw stream checks the server's code reaches our type.
    with grpc.insecure_channel(target) as channel:
        stub = client_mod.pb_grpc.PlannerStub(channel)
        first = client_mod.pb.ControlRequest(observation=client_mod.pb.ActRequest(observation=OBS))
        with pytest.raises(grpc.RpcError) as raw:
            list(stub.Control(iter([first]), timeout=5))
    error = client_mod._translate(raw.value, "Control")
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

    error = client_mod._translate(FakeRpcError(), "Act")
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
    monkeypatch.setattr(client_mod.time, "sleep", sleeps)
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


def test_act_is_not_retried(monkeypatch):
    sleeps = _Sleeps()
    monkeypatch.setattr(client_mod.time, "sleep", sleeps)
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
    assert opts.mode == client_mod.pb.PLANNER_MODE_NAIVE
    assert opts.HasField("seed") and opts.seed == 0 and opts.d_max == 12.0
    assert not opts.HasField("temperature") and not opts.HasField("sample_subgoal")
    assert not opts.HasField("prune_failed") and episode_options(prune_failed=False).HasField("prune_failed")
    assert episode_options().mode == client_mod.pb.PLANNER_MODE_UNSPECIFIED
    with pytest.raises(ValueError, match="mode"):
        episode_options("greedy")
    with pytest.raises(ValueError, match="search"):
        episode_options(search="dijkstra")


def test_client_module_needs_no_torch_or_gymnasium():
    code = ("import sys; import l3p.clients.client; "
            "bad = [m for m in ('torch', 'gymnasium', 'mujoco', 'onnxruntime') if m in sys.modules]; "
            "sys.exit(repr(bad) if bad else 0)")
    root = Path(client_mod.__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root)
    assert result.returncode == 0, result.stderr
