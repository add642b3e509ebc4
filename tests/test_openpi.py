"""The openpi listener (`l3p serve --openpi-port`, serving/openpi.py), driven by the real
openpi-client from PyPI (`WebsocketClientPolicy`) against a real server process: the same actions
as the gRPC stream, many robots at once, tokens and TLS, and every kind of bad input refused with
an error frame and a closed connection while the other robots go on."""

from __future__ import annotations

import asyncio
import collections
import pickle
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import msgpack
import numpy as np
import pytest
import websockets
import websockets.asyncio.client
import websockets.sync.client
from openpi_client import msgpack_numpy
from openpi_client.action_chunk_broker import ActionChunkBroker
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from prometheus_client.parser import text_string_to_metric_families

from l3p.core.config import EPISODE_OPTIONS
from l3p.clients.client import PlannerClient, channel_credentials
from l3p.serving.local_server import LocalServer
from l3p.serving.openpi_wire import FrameError, OpenpiKeys, decode, request
from l3p.sim.envs import make_env
from l3p.sim.render import close_env

# openpi-client 0.1.2 opens its connection the way websockets 14+ deprecates (still supported).
pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")

ROOT = Path(__file__).resolve().parents[1]
PUSH, MAZE = "FetchPush-v4", "PointMaze_Large-v3"
OBS = np.linspace(-0.5, 0.5, 25)  # a FetchPush observation for the stand-in steps
GOAL = np.array([1.3, 0.7, 0.42])
OBS_KEY = "observation/state"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("models")
    for name in (PUSH, MAZE):
        shutil.copytree(ROOT / "models" / name, root / name)
    return root


@pytest.fixture(scope="module")
def server(models):
    metrics = free_port()
    with LocalServer(models=models, extra_args=["--openpi-port", "0", "--default-model", PUSH,
                                                "--metrics-port", str(metrics)]) as served:
        served.metrics_port = metrics
        yield served


def robot(server, **kwargs) -> WebsocketClientPolicy:
    return WebsocketClientPolicy("127.0.0.1", server.openpi_port, **kwargs)


def frame(**extra) -> dict:
    return {OBS_KEY: OBS, "goal": GOAL, **extra}


def close(policy: WebsocketClientPolicy) -> None:
    """openpi-client has no close(): its connection's."""
    policy._ws.close()


# -- episodes (the metrics test first: it counts the connections open)


def scrape(server) -> dict:
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_health_and_metrics(server):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.openpi_port}/healthz", timeout=10) as answer:
        assert (answer.status, answer.read()) == (200, b"OK\n")
    before = scrape(server)
    robots = [robot(server) for _ in range(3)]
    for policy in robots:
        policy.infer(frame())
    assert (before[("l3p_openpi_connections", ())], scrape(server)[("l3p_openpi_connections", ())]) == (0, 3)
    with pytest.raises(RuntimeError):
        robots[0].infer({OBS_KEY: OBS[:3]})
    after = scrape(server)
    invalid = ("l3p_errors_total", (("code", "INVALID_ARGUMENT"),))
    assert after[invalid] == before.get(invalid, 0) + 1
    assert after[("l3p_steps_total", (("model", PUSH),))] == 3
    assert after[("l3p_sessions_started_total", (("model", PUSH),))] == 3
    for policy in robots[1:]:
        close(policy)


def test_the_metadata_frame_describes_the_default_model_and_the_mapping(server):
    policy = robot(server)
    info = policy.get_server_metadata()
    close(policy)
    assert (info["model"], info["env_id"], info["obs_dim"], info["goal_dim"], info["action_dim"]) == (
        PUSH, PUSH, 25, 3, 4)
    assert sorted(info["models"]) == sorted([PUSH, MAZE])
    assert info["action_low"].dtype == np.float32 and list(info["action_high"]) == [1, 1, 1, 1]
    assert info["keys"] == {"observation": OBS_KEY, "goal": "goal", "model": "model", "reset": "reset",
                            "options": "options"}
    assert (info["action_horizon"], info["max_frame_bytes"]) == (1, 1 << 20)


def drive(env_id: str, seed: int, steps: int, act, env=None) -> list:
    """One env episode, reset with ``seed``: act(observation, goal) -> (action, reply) each step."""
    own = env is None
    env = make_env(env_id) if own else env
    try:
        obs, _ = env.reset(seed=seed)
        replies = []
        for _ in range(steps):
            action, reply = act(obs["observation"], obs["desired_goal"])
            replies.append(reply)
            obs, *_ = env.step(action)
        return replies
    finally:
        if own:
            close_env(env)


def openpi_episode(policy: WebsocketClientPolicy, env_id: str, seed: int, steps: int, env=None) -> list[dict]:
    def act(obs, goal):
        reply = policy.infer({OBS_KEY: obs, "goal": goal, "model": env_id, "options": {"seed": seed},
                              "observation/image": np.zeros((8, 8, 3), np.uint8), "prompt": "push"})
        return reply["actions"][0], reply

    return drive(env_id, seed, steps, act, env)


def stream_episode(server, env_id: str, seed: int, steps: int) -> list:
    with PlannerClient(f"127.0.0.1:{server.port}", model=env_id, timeout_s=20) as client:
        episode = None

        def act(obs, goal):
            nonlocal episode
            if episode is None:
                episode = client.stream_episode(goal, seed=seed).start()
            step = episode.act(obs)
            return step.action, step

        try:
            return drive(env_id, seed, steps, act)
        finally:
            episode.end()


@pytest.mark.parametrize("env_id, steps", [(PUSH, 50), (MAZE, 60)])
def test_episodes_give_the_grpc_streams_actions_on_the_same_seeds(server, env_id, steps):
    policy = robot(server)
    for episode, seed in enumerate((2_000_000_000, 2_000_000_001)):  # a new goal: a new episode
        over_openpi = openpi_episode(policy, env_id, seed, steps)
        over_grpc = stream_episode(server, env_id, seed, steps)
        assert np.array_equal(np.stack([r["actions"] for r in over_openpi]),
                              np.stack([s.action for s in over_grpc])[:, None, :])
        assert [r["actions"].dtype for r in over_openpi] == [np.float32] * steps
        assert [(r["subgoal_index"], r["replanned"]) for r in over_openpi] == [
            (s.subgoal_index, s.replanned) for s in over_grpc]
        assert [(r["episode"], r["step"], r["model"]) for r in over_openpi] == [
            (episode, i, env_id) for i in range(steps)]
        assert "prev_total_ms" in over_openpi[1]["server_timing"] and over_openpi[1]["server_timing"]["infer_ms"] > 0
    close(policy)


def test_a_reset_starts_a_new_episode_and_a_frame_without_goal_continues_one(server):
    policy = robot(server)
    first = [policy.infer(frame()) for _ in range(3)]
    assert [(r["episode"], r["step"]) for r in first] == [(0, 0), (0, 1), (0, 2)]
    assert policy.infer({OBS_KEY: OBS})["step"] == 3  # the goal is the running episode's
    again = policy.infer(frame(reset=True))
    assert (again["episode"], again["step"], again["replanned"]) == (1, 0, True)
    assert np.array_equal(again["actions"], first[0]["actions"])
    assert policy.infer({OBS_KEY: OBS, "reset": np.bool_(True)})["episode"] == 2  # the same goal again
    close(policy)


def test_openpi_clients_action_chunk_broker_asks_every_step(server):
    policy = robot(server)
    broker = ActionChunkBroker(policy, action_horizon=policy.get_server_metadata()["action_horizon"])
    replies = [broker.infer(frame()) for _ in range(3)]
    assert [(r["step"], r["actions"].shape, r["subgoal"].shape) for r in replies] == [
        (0, (4,), (3,)), (1, (4,), (3,)), (2, (4,), (3,))]
    close(policy)


def test_the_key_mapping_is_config_and_an_idle_episode_expires(tmp_path):
    config = tmp_path / "serve.toml"
    config.write_text('openpi_port = 0\nopenpi_key = ["observation=state", "goal=target"]\nsession_ttl = 0.5\n')
    with LocalServer(ROOT / "models" / PUSH, extra_args=["--config", str(config)]) as served:
        policy = robot(served)
        assert policy.get_server_metadata()["keys"]["observation"] == "state"
        assert policy.infer({"state": OBS, "target": GOAL})["step"] == 0
        with pytest.raises(RuntimeError, match="INVALID_ARGUMENT: the observation dict has no 'state'"):
            policy.infer(frame())
        idle = robot(served)
        idle.infer({"state": OBS, "target": GOAL})
        time.sleep(2.0)  # past the TTL and the reaper's next pass
        with pytest.raises(RuntimeError, match="NOT_FOUND: session_id '.*' is not a live session"):
            idle.infer({"state": OBS})


def test_32_robots_at_once_get_the_actions_they_get_one_at_a_time(server):
    seeds = [2_000_000_100 + i for i in range(32)]
    envs = {seed: make_env(PUSH) for seed in seeds}

    def episode(seed: int, out: dict, start: threading.Barrier | None = None) -> None:
        policy = robot(server)
        if start is not None:
            start.wait(timeout=60)
        out[seed] = [r["actions"] for r in openpi_episode(policy, PUSH, seed, 15, envs[seed])]
        close(policy)

    alone: dict = {}
    for seed in seeds:
        episode(seed, alone)
    together: dict = {}
    start = threading.Barrier(len(seeds))
    threads = [threading.Thread(target=episode, args=(seed, together, start)) for seed in seeds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for env in envs.values():
        close_env(env)
    assert sorted(together) == seeds
    for seed in seeds:
        assert np.array_equal(np.stack(together[seed]), np.stack(alone[seed])), seed


# -- bad input: an error frame, the connection closed, the other robots undisturbed


@pytest.fixture(scope="module")
def bystander(server):
    """A robot in the middle of an episode while others misbehave."""
    policy = robot(server)
    policy.infer(frame())
    return policy


def undisturbed(server, bystander) -> None:
    before = bystander.infer({OBS_KEY: OBS})
    after = bystander.infer({OBS_KEY: OBS})
    assert (after["episode"], after["step"]) == (0, before["step"] + 1)
    assert server.proc.poll() is None


def refused_dict(server, item: dict) -> str:
    """Sends one observation dict with openpi-client: the error text it raised."""
    policy = robot(server)
    with pytest.raises(RuntimeError, match="Error in inference server") as error:
        policy.infer(item)
    with pytest.raises(websockets.ConnectionClosed) as closed:
        policy.infer(frame())
    assert closed.value.rcvd.code == 1008
    return str(error.value).split("\n", 1)[1]


def refused_frame(server, data: bytes | str, close: int = 1008) -> str:
    """Sends one raw frame: the error frame's text."""
    with websockets.sync.client.connect(f"ws://127.0.0.1:{server.openpi_port}", compression=None) as ws:
        msgpack_numpy.unpackb(ws.recv())
        ws.send(data)
        text = ws.recv(timeout=20)
        assert isinstance(text, str)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            ws.recv(timeout=20)
        assert closed.value.rcvd.code == close
        return text


@pytest.mark.parametrize("data, message", [
    (b"\xc1 not msgpack", "INVALID_ARGUMENT: the frame is not one msgpack value"),
    (b"", "INVALID_ARGUMENT: the frame is not one msgpack value"),
    ("a text frame", "INVALID_ARGUMENT: a text frame: send the observation dict as a binary msgpack frame"),
    (msgpack.packb([1, 2, 3]), "INVALID_ARGUMENT: the frame is a msgpack list, expected a map"),
    (msgpack.packb({1: 2}), "INVALID_ARGUMENT: the observation dict's keys must be strings"),
    (msgpack.packb({OBS_KEY: msgpack.ExtType(42, b"x")}), "INVALID_ARGUMENT: msgpack extension type 42"),
])
def test_a_frame_that_is_not_an_observation_dict(server, bystander, data, message):
    assert refused_frame(server, data).startswith(message)
    undisturbed(server, bystander)


class _Trap:
    """Creates a file when unpickled: a pickle payload that would run code."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


def test_pickled_payloads_are_refused_unread(server, bystander, tmp_path):
    trap = tmp_path / "unpickled"
    payload = pickle.dumps(_Trap(trap), protocol=4)
    cases = {
        payload: "the frame looks like a pickle: refused unread",
        # msgpack-numpy's object arrays are pickles
        msgpack.packb({OBS_KEY: {b"nd": True, b"type": "|O", b"kind": b"O", b"shape": [1], b"data": payload}}):
            "msgpack-numpy kind b'O' is a pickled object: refused",
        msgpack.packb({OBS_KEY: {b"__ndarray__": True, b"dtype": "|O", b"shape": [1], b"data": payload}}):
            "an object array (a pickle) is refused",
        msgpack.packb({OBS_KEY: {b"__npgeneric__": True, b"dtype": "|V8", b"data": payload[:8]}}):
            "dtype '|V8' is refused",
    }
    for data, message in cases.items():
        assert message in refused_frame(server, data)
    assert not trap.exists()
    undisturbed(server, bystander)


@pytest.mark.parametrize("item, message", [
    ({"state": OBS, "goal": GOAL},
     "INVALID_ARGUMENT: the observation dict has no 'observation/state' (the observation vector); its keys: "
     "'state', 'goal' (--openpi-key observation=KEY maps another)"),
    ({OBS_KEY: OBS}, "INVALID_ARGUMENT: the first observation of an episode carries its goal: no 'goal'"),
    (frame(options={"speed": 1}), "INVALID_ARGUMENT: options has 'speed', not an episode option"),
    (frame(options={"mode": "fast"}), "INVALID_ARGUMENT: options.mode is 'fast', expected one of l3p, naive, policy"),
    (frame(options={"d_max": -1.0}), "INVALID_ARGUMENT: options.d_max"),
    (frame(reset="yes"), "INVALID_ARGUMENT: reset is 'yes', expected true or false"),
    (frame(model="no-such-model"), "NOT_FOUND: model 'no-such-model' is not served here"),
])
def test_wrong_keys(server, bystander, item, message):
    assert refused_dict(server, item).startswith(message)
    undisturbed(server, bystander)


@pytest.mark.parametrize("item, message", [
    ({OBS_KEY: OBS[:10], "goal": GOAL},
     "INVALID_ARGUMENT: observation/state has 10 values, expected 25 (obs_dim of FetchPush-v4)"),
    ({OBS_KEY: np.stack([OBS, OBS]), "goal": GOAL}, "INVALID_ARGUMENT: observation/state has shape [2, 25]"),
    ({OBS_KEY: OBS, "goal": GOAL[:2]}, "INVALID_ARGUMENT: goal has 2 values, expected 3 (goal_dim of FetchPush-v4)"),
    ({OBS_KEY: OBS > 0, "goal": GOAL}, "INVALID_ARGUMENT: observation/state is ndarray of dtype bool"),
    ({OBS_KEY: "0.1, 0.2", "goal": GOAL}, "INVALID_ARGUMENT: observation/state is str"),
    ({OBS_KEY: [0.1, "x"], "goal": GOAL}, "INVALID_ARGUMENT: observation/state must be numbers"),
])
def test_wrong_shapes_and_types(server, bystander, item, message):
    assert refused_dict(server, item).startswith(message)
    undisturbed(server, bystander)


@pytest.mark.parametrize("item, message", [
    ({OBS_KEY: np.where(np.arange(25) == 4, np.nan, OBS), "goal": GOAL},
     "INVALID_ARGUMENT: observation/state[4] is nan, expected a finite number (1 of 25 values are NaN or Inf)"),
    ({OBS_KEY: OBS, "goal": np.array([1.3, np.inf, 0.4])}, "INVALID_ARGUMENT: goal[1] is inf"),
    ({OBS_KEY: np.full(25, 1e39), "goal": GOAL}, "INVALID_ARGUMENT: observation/state[0] is inf"),
])
def test_nan_and_inf(server, bystander, item, message):
    assert refused_dict(server, item).startswith(message)
    undisturbed(server, bystander)


def test_an_oversized_frame_is_refused_before_it_is_read(server, bystander):
    policy = robot(server)
    with pytest.raises(websockets.ConnectionClosedError) as closed:
        policy.infer(frame(image=np.zeros((1024, 1024, 3), np.uint8)))
    assert closed.value.sent.code == 1009 or closed.value.rcvd.code == 1009
    assert closed.value.rcvd.reason.endswith("exceeds limit of 1048576 bytes (--openpi-max-frame-bytes)")
    undisturbed(server, bystander)


def test_a_flood_of_frames_is_refused(server, bystander):
    data = msgpack_numpy.packb(frame())
    with websockets.sync.client.connect(f"ws://127.0.0.1:{server.openpi_port}", compression=None) as ws:
        ws.recv()
        try:
            for _ in range(200):  # without reading the answers
                ws.send(data)
        except websockets.ConnectionClosed:  # refused while still sending
            pass
        answers = []
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                answers.append(ws.recv(timeout=20))
    assert closed.value.rcvd.code == 1008
    assert answers[-1] == ("RESOURCE_EXHAUSTED: more than 4 frames sent ahead of their answers: send one "
                           "observation, wait for its answer")
    steps = [msgpack_numpy.unpackb(a)["step"] for a in answers[:-1]]
    assert steps == list(range(len(steps))) and len(steps) < 200
    undisturbed(server, bystander)


def test_busy_openpi_port_is_refused_in_one_line():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "l3p.serving", "--bundle", str(ROOT / "models" / PUSH),
                               "--port", "0", "--openpi-port", str(port)], capture_output=True, text=True,
                              timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(
        f"l3p serve: error: cannot bind 127.0.0.1:{port} (--openpi-port): address already in use")


# -- tokens, TLS and quotas shared with gRPC


@pytest.fixture(scope="module")
def secure_server(tls_dir, token_file):
    path, tokens = token_file
    # On localhost, as the certificate names it: both its addresses held, so a robot dialling
    # localhost (::1 first) never reaches another process that took ::1 on the same port.
    with LocalServer(ROOT / "models" / PUSH, host="localhost", extra_args=[
            "--openpi-port", "0", "--tls-cert", str(tls_dir / "server.crt"), "--tls-key",
            str(tls_dir / "server.key"), "--auth-token-file", str(path),
            "--max-sessions-per-principal", "1"]) as served:
        served.tokens = tokens
        yield served


@pytest.fixture
def trust_ca(tls_dir, monkeypatch):
    """openpi-client takes no CA argument: its TLS context reads the default paths, SSL_CERT_FILE."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_dir / "ca.crt"))


def secure_robot(server, token: str | None) -> WebsocketClientPolicy:
    return WebsocketClientPolicy("wss://localhost", server.openpi_port, api_key=token)


def test_tokens_are_refused_and_accepted_over_wss(secure_server, trust_ca):
    for token in (None, "not-a-token-of-this-server"):
        with pytest.raises(websockets.InvalidStatus) as refused:
            secure_robot(secure_server, token)
        assert refused.value.response.status_code == 401
    # The unnamed token: robot-a and robot-b, one session each at most, are the next test's.
    policy = secure_robot(secure_server, secure_server.tokens[""])
    assert policy.get_server_metadata()["env_id"] == PUSH
    assert [policy.infer(frame())["step"] for _ in range(3)] == [0, 1, 2]
    close(policy)


def test_plaintext_to_the_tls_port_is_refused(secure_server):
    with pytest.raises((websockets.InvalidMessage, websockets.InvalidHandshake, OSError, EOFError)):
        WebsocketClientPolicy("127.0.0.1", secure_server.openpi_port, api_key=secure_server.tokens["robot-a"])


def test_a_callers_session_quota_spans_grpc_and_openpi(secure_server, tls_dir, trust_ca):
    tokens = secure_server.tokens
    credentials = channel_credentials(tls_dir / "ca.crt")
    with PlannerClient(f"localhost:{secure_server.port}", credentials=credentials, token=tokens["robot-a"],
                       timeout_s=20) as client:
        with client.episode(GOAL):  # robot-a's one session (--max-sessions-per-principal 1)
            policy = secure_robot(secure_server, tokens["robot-a"])
            with pytest.raises(RuntimeError, match="RESOURCE_EXHAUSTED: session limit reached: 1 live "
                                                   "sessions of 'token:robot-a'"):
                policy.infer(frame())
            with pytest.raises(websockets.ConnectionClosed) as closed:
                policy.infer(frame())
            assert closed.value.rcvd.code == 1013
            assert secure_robot(secure_server, tokens["robot-b"]).infer(frame())["step"] == 0
        assert secure_robot(secure_server, tokens["robot-a"]).infer(frame())["step"] == 0


def test_health_over_tls_needs_no_token(secure_server, tls_dir):
    context = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
    with urllib.request.urlopen(f"https://localhost:{secure_server.openpi_port}/healthz", context=context,
                                timeout=10) as answer:
        assert answer.read() == b"OK\n"


# -- processes


def test_the_processes_of_one_server_share_the_openpi_port_and_close_its_connections_on_sigterm():
    with LocalServer(ROOT / "models" / PUSH, extra_args=["--openpi-port", "0", "--processes", "2"]) as served:
        robots = [robot(served) for _ in range(4)]
        for policy in robots:
            assert [policy.infer(frame())["step"] for _ in range(3)] == [0, 1, 2]
        served.proc.send_signal(signal.SIGTERM)
        for policy in robots:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                policy._ws.recv(timeout=30)
            assert closed.value.rcvd.code == 1001
        assert served.proc.wait(timeout=60) == 0


# -- fuzz

_DTYPES = ["<f4", "<f8", "<i8", "|u1", "|b1", "<f2", ">f4", "|O", "|V8", "<U3", "S5", "f8,i4", "<c8", "M8[s]",
           "garbage", 7, b"<f4"]
_KEYS = [OBS_KEY, "goal", "model", "reset", "options", "prompt", "observation/image", "", "__ndarray__"]


def random_value(rng: np.random.Generator, depth: int = 0):
    """Any msgpack value: scalars, NaN/Inf, strings, bytes, extension types, nested lists and maps,
    and array maps of both numpy conventions, consistent or not, with dtypes good and bad."""
    kind = rng.integers(0, 12 if depth < 3 else 7)
    if kind == 0:
        return int(rng.integers(-2**63, 2**63 - 1))
    if kind == 1:
        return float(rng.choice([np.nan, np.inf, -np.inf, 0.0, 1e300, rng.normal()]))
    if kind == 2:
        return bool(rng.integers(2))
    if kind == 3:
        return None
    if kind == 4:
        return rng.bytes(int(rng.integers(0, 40)))
    if kind == 5:
        return "".join(chr(int(c)) for c in rng.integers(32, 0x3000, int(rng.integers(0, 12))))
    if kind == 6:
        return msgpack.ExtType(int(rng.integers(0, 128)), rng.bytes(3))
    if kind == 7:
        return [random_value(rng, depth + 1) for _ in range(int(rng.integers(0, 5)))]
    if kind == 8:
        return {str(rng.choice(_KEYS)): random_value(rng, depth + 1) for _ in range(int(rng.integers(0, 4)))}
    dtype = _DTYPES[int(rng.integers(len(_DTYPES)))]
    shape = [int(n) for n in rng.integers(-1, 30, int(rng.integers(0, 4)))]
    data = rng.bytes(int(rng.integers(0, 300)))
    if kind == 9:
        return {b"__ndarray__": True, b"data": data, b"dtype": dtype, b"shape": shape}
    if kind == 10:
        return {b"nd": bool(rng.integers(2)), b"type": dtype, b"kind": rng.choice([b"", b"O", b"V"]),
                b"shape": shape, b"data": data}
    return rng.normal(size=int(rng.choice([3, 25, 4, 10]))).astype(rng.choice([np.float32, np.float64]))


def random_frames(n: int, seed: int = 0) -> list[bytes]:
    """Random bytes, mutated observations, random msgpack values, and (five in six) observations
    beside random extra keys, which keep a connection open for the frames after them: a refused
    frame costs a new connection, the fuzz's most expensive part."""
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(n):
        valid = {OBS_KEY: rng.normal(size=25), "goal": GOAL}
        if i % 18 == 0:
            frames.append(rng.bytes(int(rng.integers(0, 200))))
        elif i % 18 == 1:
            data = bytearray(msgpack_numpy.packb(valid))
            for _ in range(int(rng.integers(1, 4))):
                at = int(rng.integers(len(data) or 1))
                change = rng.integers(3)
                if change == 0 and at < len(data):
                    data[at] ^= 1 << int(rng.integers(8))
                elif change == 1:
                    del data[at:]
                else:
                    data[at:at] = rng.bytes(int(rng.integers(1, 5)))
            frames.append(bytes(data))
        elif i % 18 == 2:
            frames.append(msgpack.packb(random_value(rng, depth=0), default=msgpack_numpy.pack_array))
        else:
            for _ in range(int(rng.integers(0, 3))):
                valid[f"x{rng.integers(9)}"] = (random_value(rng, depth=3) if rng.integers(2)
                                               else rng.normal(size=int(rng.integers(0, 64))))
            frames.append(msgpack_numpy.packb(valid))
    return frames


async def send_all(port: int, frames: list[bytes], connections: int = 8) -> tuple[list, list]:
    """Every frame, in order, over `connections` robots at once (a new connection after each
    refusal): the replies and the error texts."""
    todo = list(reversed(frames))
    replies, errors = [], []

    async def one_robot() -> None:
        ws = None
        while todo:
            data = todo.pop()
            if ws is None:
                ws = await websockets.asyncio.client.connect(f"ws://127.0.0.1:{port}", compression=None)
                await ws.recv()
            await ws.send(data)
            answer = await ws.recv()
            if isinstance(answer, str):
                errors.append(answer)
                await ws.close()
                ws = None
            else:
                replies.append(msgpack_numpy.unpackb(answer))
        if ws is not None:
            await ws.close()

    await asyncio.gather(*(one_robot() for _ in range(connections)))
    return replies, errors


def test_a_fuzz_of_10000_random_frames_is_answered_without_a_crash(server, bystander):
    frames = random_frames(10_000)
    replies, errors = asyncio.run(send_all(server.openpi_port, frames))
    assert len(replies) + len(errors) == len(frames)  # every frame answered
    # never INTERNAL; RESOURCE_EXHAUSTED: a frame past its reading bounds (thousands of keys, say)
    assert {error.split(":", 1)[0] for error in errors} <= {"INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED"}
    assert len(errors) > 1000 and len(replies) > 5000
    assert {r["actions"].shape for r in replies} == {(1, 4)}
    undisturbed(server, bystander)


def test_the_frame_reader_raises_nothing_but_its_refusals():
    """The reader the listener runs on every frame, on the fuzz's frames and on random episode
    options: a request or an INVALID_ARGUMENT refusal, nothing else."""
    rng = np.random.default_rng(1)
    names = ["mode", "seed", *EPISODE_OPTIONS, "speed"]
    options = [msgpack_numpy.packb(frame(options={str(rng.choice(names)): random_value(rng, depth=2)
                                                  for _ in range(int(rng.integers(1, 4)))}))
               for _ in range(2000)]
    outcomes = collections.Counter()
    for data in random_frames(10_000, seed=1) + options:
        try:
            request(decode(data, OpenpiKeys()), OpenpiKeys())
            outcomes["read"] += 1
        except FrameError:
            outcomes["refused"] += 1
    assert outcomes["read"] > 1000 and outcomes["refused"] > 1000


# -- an openpi robot, unmodified: the model in the URL, what reset() sends, a prompt, a chunk


def test_the_url_names_the_model_its_metadata_and_episodes(server):
    policy = WebsocketClientPolicy(f"ws://127.0.0.1:{server.openpi_port}/models/{MAZE}")
    info = policy.get_server_metadata()
    assert (info["model"], info["env_id"], info["obs_dim"], info["goal_dim"]) == (MAZE, MAZE, 4, 2)
    reply = policy.infer({OBS_KEY: np.zeros(4), "goal": np.array([3.0, 2.0])})
    assert (reply["model"], reply["actions"].shape) == (MAZE, (1, 2))
    close(policy)
    with pytest.raises(websockets.ConnectionClosedError) as closed:
        WebsocketClientPolicy(f"ws://127.0.0.1:{server.openpi_port}/models/PointMaze_Larg")
    assert closed.value.rcvd.code == 1008 and closed.value.rcvd.reason == (
        f"model 'PointMaze_Larg' is not served here; models: {', '.join(sorted([PUSH, MAZE]))}")


def test_reset_sends_nothing_and_a_new_goal_or_a_reset_key_starts_an_episode(server):
    """openpi-client's ``WebsocketClientPolicy.reset()`` is ``pass``: the episode goes on through it;
    a new goal, ``reset: True`` or a new connection starts the next one (docs/guides/openpi.md)."""
    policy = robot(server)
    assert policy.infer(frame())["episode"] == 0
    policy.reset()
    assert (policy.infer(frame())["episode"], policy.infer(frame())["step"]) == (0, 2)
    assert policy.infer(frame(goal=GOAL + 0.05))["episode"] == 1
    assert policy.infer(frame(goal=GOAL + 0.05, reset=True))["episode"] == 2
    close(policy)


def test_a_prompt_without_a_goal_is_refused_naming_what_to_send(server, bystander):
    assert refused_dict(server, {OBS_KEY: OBS, "prompt": "push the block to the red dot"}) == (
        "INVALID_ARGUMENT: a 'prompt' is not a goal this planner can read: send the goal as 3 numbers under "
        "'goal' in the first observation of each episode (a target position, say; --openpi-key goal=KEY maps "
        "another)")
    undisturbed(server, bystander)


def test_an_action_horizon_over_1_fails_inside_openpi_client_as_the_guide_says(server):
    """The planner answers one action per observation; openpi-client's broker with action_horizon=10
    slices a second action that is not there, on the client, without asking the server: the guide
    quotes that error next to its fix."""
    policy = robot(server)
    broker = ActionChunkBroker(policy, action_horizon=10)
    broker.infer(frame())
    with pytest.raises(IndexError) as err:
        broker.infer(frame())
    close(policy)
    guide = (ROOT / "docs" / "guides" / "openpi.md").read_text()
    assert f"IndexError: {err.value}" in guide and "action_horizon=1" in guide
