"""The C++ robot client (clients/cpp, docs/guides/cpp.md) against a real `l3p serve`.

Built once per test session by the guide's own build block, at -O1, into build/cpp-test
(git-ignored and kept between sessions: a rerun compiles only what changed); skipped, with the
reason, only when the compiler or the grpc++/protobuf packages are missing (scripts/test installs
them as root). `l3p_replay` runs a script of goals and observations and writes what the server
answered, floats as float32 bit patterns; `python_replay` runs the same script through the Python
client into the same records, so the two clients are compared record by record, bit for bit.
"""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest

from l3p.clients.client import PlannerClient, PlannerError, Step, channel_credentials, read_token
from l3p.clients.errors import translate
from l3p.core.seeds import HELD_OUT
from l3p.protos import l3p_planner_pb2 as pb
from l3p.serving.local_server import LocalServer

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "cpp.md"
BUILD = ROOT / "build" / "cpp-test"
PACKAGES = "cmake g++ make libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc"
EPISODE_STEPS = {"FetchPush-v4": 50, "PointMaze_Large-v3": 150}  # the recorded episodes' length
EPISODES = 5  # per model


def build_block() -> str:
    """The commands of the guide's build block (the one after its marker comment)."""
    marker = r"<!-- guide-test: skip: tests/test_cpp_client\.py runs this block[^>]*-->\n"
    match = re.search(marker + r"```bash\n(.*?)```", GUIDE.read_text(), re.S)
    assert match, "docs/guides/cpp.md lost the build block this test runs"
    return match[1]


@pytest.fixture(scope="session")
def programs() -> Path:
    """The guide's build, into BUILD at -O1 (Debian's convention: build type None, CXXFLAGS)."""
    for tool in ("cmake", "c++", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool}: apt-get install {PACKAGES} (scripts/test installs them as root)")
    block = build_block()
    assert "build/cpp" in block
    env = {**os.environ, "CMAKE_BUILD_TYPE": "None", "CXXFLAGS": "-O1"}
    proc = subprocess.run(["bash", "-euc", block.replace("build/cpp", str(BUILD))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    output = proc.stdout + proc.stderr
    missing = r'Could NOT find Protobuf|provided by "gRPC"|"gRPC::grpc_cpp_plugin" references|no protoc'
    if proc.returncode != 0 and re.search(missing, output):
        pytest.skip(f"grpc++ or protobuf is not installed: apt-get install {PACKAGES} "
                    "(scripts/test installs them as root)")
    assert proc.returncode == 0, output[-4000:]
    return BUILD


@dataclasses.dataclass(frozen=True)
class Served:
    target: str
    ca: Path  # the CA that signed the server's certificate
    token_file: Path  # a robot's token file (its first line)


@pytest.fixture(scope="module")
def server(tmp_path_factory, tls_dir, token_file):
    """Both models behind TLS and tokens, as a robot away from the server reaches it."""
    models = tmp_path_factory.mktemp("cpp_models")
    for name in EPISODE_STEPS:
        shutil.copytree(ROOT / "models" / name, models / name)  # symbolic links are never served
    args = ["--tls-cert", str(tls_dir / "server.crt"), "--tls-key", str(tls_dir / "server.key"),
            "--auth-token-file", str(token_file[0])]
    with LocalServer(models=models, extra_args=args) as running:
        yield Served(running.target, tls_dir / "ca.crt", token_file[0])


def python_client(server: Served, model: str, token: bool = True, timeout_s: float = 5.0) -> PlannerClient:
    return PlannerClient(server.target, model=model, credentials=channel_credentials(server.ca),
                         token=read_token(server.token_file) if token else None, timeout_s=timeout_s)


def cpp_options(server: Served, model: str, token: bool = True) -> list[str]:
    return ["--target", server.target, "--model", model, "--tls-ca", str(server.ca),
            *(["--token-file", str(server.token_file)] if token else [])]


# -- the records both clients write


def bits(values) -> list[str]:
    return [f"{b:08x}" for b in np.asarray(values, np.float32).reshape(-1).view(np.uint32)]


def step_record(step: Step) -> dict:
    return {"action": bits(step.action), "subgoal": bits(step.subgoal), "subgoal_index": step.subgoal_index,
            "replanned": step.replanned, "counter": step.counter, "step": step.step,
            "estimated_distance": bits([step.estimated_distance])[0], "resumed": step.resumed}


def script_line(word: str, values) -> str:
    """A script line; repr of each float32 reads back bit for bit (C++ strtof, Python float)."""
    return " ".join([word, *(repr(float(v)) for v in np.asarray(values, np.float32))])


def python_replay(client: PlannerClient, script: list[str], unary: bool = False) -> list[dict]:
    """`l3p_replay`'s commands through the Python client, into its records (without session ids
    and latencies)."""
    records, episode = [], None
    for line in script:
        word, *args = line.split()
        try:
            if word == "info":
                info = client.model_info()
                records.append({name: getattr(info, name) for name in (
                    "env_id", "model", "obs_dim", "goal_dim", "action_dim", "n_landmarks", "bundle_sha256")})
            elif word == "goal":
                if episode is not None:
                    episode.end()
                episode = None  # a goal the server refuses leaves no episode
                episode = (client.episode if unary else client.stream_episode)([float(a) for a in args]).start()
                records.append({"landmark_to_goal": bits(episode.landmark_to_goal)})
            elif word == "obs":
                records.append(step_record(episode.act([float(a) for a in args])))
            elif word == "end":
                episode.end()
                episode = None
                records.append({"ended": True})
            elif word == "act":
                records.append(step_record(client.act(args[0], [float(a) for a in args[1:]])))
            elif word == "stream-obs":
                first = pb.ControlRequest(observation=pb.ActRequest(observation=[float(a) for a in args]))
                try:
                    records.append(step_record(Step.from_proto(next(client.control(iter([first]), 5.0)).action)))
                except grpc.RpcError as err:
                    raise translate(err, "Control") from None
        except PlannerError as err:
            records.append({"error": type(err).__name__, "code": err.code.name, "message": err.message})
    return records


def cpp_replay(programs: Path, options: list[str], script: list[str], unary: bool = False) -> list[dict]:
    """`l3p_replay`'s records, without session ids, latencies and the end's counts."""
    proc = subprocess.run([str(programs / "l3p_replay"), *options, *(["--unary"] if unary else [])],
                          input="\n".join(script) + "\n", capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = []
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        record.pop("session_id", None)
        record.pop("latency_us", None)
        records.append({"ended": True} if "ended" in record else record)
    return records


@pytest.fixture(scope="module")
def recorded(server):
    """Per model, EPISODES held-out episodes the Python client drove in the simulator (a stream
    each): the script replaying them (goal, each observation sent, end) and the Python client's
    records of them."""
    from l3p.sim.envs import make_env
    from l3p.sim.render import close_env

    episodes = {}
    for model, steps in EPISODE_STEPS.items():
        env = make_env(model, max_episode_steps=steps)
        script, records = [], []
        with python_client(server, model) as client:
            for i in range(EPISODES):
                obs, _ = env.reset(seed=HELD_OUT + i)
                goal = np.float32(obs["desired_goal"])  # what the wire carries
                with client.stream_episode(goal) as ep:
                    script.append(script_line("goal", goal))
                    records.append({"landmark_to_goal": bits(ep.landmark_to_goal)})
                    done = False
                    while not done:
                        observation = np.float32(obs["observation"])
                        step = ep.act(observation)
                        script.append(script_line("obs", observation))
                        records.append(step_record(step))
                        obs, _, terminated, truncated, _ = env.step(step.action)
                        done = terminated or truncated
                script.append("end")
                records.append({"ended": True})
        close_env(env)
        episodes[model] = (script, records)
    return episodes


def test_recorded_episodes_give_the_python_clients_actions_and_subgoals_bit_for_bit(programs, server, recorded):
    """10 recorded episodes of two models, replayed through C++ on a stream and on unary calls:
    every landmark-to-goal distance, action, subgoal, index, counter and estimate is the Python
    client's, to the bit (0 differences)."""
    steps = 0
    for model, (script, records) in recorded.items():
        assert sum(line == "end" for line in script) == EPISODES
        for unary in (False, True):
            replayed = cpp_replay(programs, cpp_options(server, model), script, unary)
            assert len(replayed) == len(records)
            differences = [i for i, (cpp, python) in enumerate(zip(replayed, records)) if cpp != python]
            assert not differences, (model, unary, len(differences), replayed[differences[0]], records[differences[0]])
            steps += sum("action" in record for record in replayed)
    assert steps == 2 * EPISODES * sum(EPISODE_STEPS.values())  # 2,000 steps compared


def test_bad_inputs_get_the_python_clients_typed_errors(programs, server, recorded):
    """Wrong lengths, NaN, Inf, an unknown session, an observation before the goal on a stream, an
    expired deadline and a missing token: the same error type, status and message from both
    clients; after a refused observation the episode goes on the same way in both."""
    model = "FetchPush-v4"
    script = recorded[model][0]
    goal, first, second = (line.split()[1:] for line in script[:3])
    bad = [" ".join(words) for words in (
        ["info"], ["goal", *goal], ["obs", *first],
        ["obs", *first[:-1]], ["obs", "nan", *first[1:]], ["obs", *first[:-1], "inf"],  # refused
        ["obs", *second], ["end"],
        ["goal", *goal[:-1]], ["act", "no-such-session", *first], ["stream-obs", *first])]
    for unary in (False, True):
        with python_client(server, model) as client:
            expected = python_replay(client, bad, unary)
        assert cpp_replay(programs, cpp_options(server, model), bad, unary) == expected
        assert [(r["error"], r["code"]) for r in expected if "error" in r] == [
            ("InvalidArgument", "INVALID_ARGUMENT")] * 4 + [("NotFound", "NOT_FOUND"),
                                                             ("FailedPrecondition", "FAILED_PRECONDITION")]
        assert "expected 25" in expected[3]["message"] and "nan" in expected[4]["message"]
        assert expected[6]["step"] == (1 if unary else 0)  # a refused message ends a stream: reopened

    with python_client(server, model, token=False) as client:
        expected = python_replay(client, ["info"])
    assert expected[0]["error"] == "Unauthenticated"
    assert cpp_replay(programs, cpp_options(server, model, token=False), ["info"]) == expected

    # A deadline of a microsecond can be beaten by a local call (gRPC's timers are coarser): a port that
    # takes the connection and never answers makes every call outlast its deadline.
    with socket.create_server(("127.0.0.1", 0), backlog=8) as silent:
        mute = dataclasses.replace(server, target=f"127.0.0.1:{silent.getsockname()[1]}")
        with python_client(mute, model, timeout_s=0.2) as client:
            expected = python_replay(client, ["info"])
        assert expected[0]["error"] == "DeadlineExceeded"
        assert cpp_replay(programs, [*cpp_options(mute, model), "--timeout", "0.2"], ["info"]) == expected


class _Lines:
    """A program's stdout lines as they come, waited on with a deadline."""

    def __init__(self, command: list[str]):
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, wanted: Callable[[str], bool], timeout_s: float) -> int:
        """Reads until a line is `wanted`; its index."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout_s} s; the last: {self.lines[-5:]}") from None
            assert line is not None, f"the program ended: {self.lines[-5:]} {self.proc.stderr.read()[-2000:]}"
            self.lines.append(line)
            if wanted(line):
                return len(self.lines) - 1

    def stop(self) -> None:
        """Ctrl-C, then the rest of its lines."""
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)


class _Replay:
    """l3p_replay fed one command at a time."""

    def __init__(self, command: list[str]):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(self, line: str) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())


def test_a_server_killed_mid_stream_gives_holds_then_actions_again_after_its_restart(programs, recorded, tmp_path):
    """l3p_drive (the control-loop helper at 50 Hz, keeping the last action while it is fresh)
    against a plaintext loopback server that is killed mid-episode and restarted on its port:
    actions, then holds naming the fault, then actions of a new session with the same goal; no
    action is ever older than the bound. Episodes made with resume (a stream, unary calls) carry
    on across the restart in a new session: step 0, one re-plan, the same action. The server
    holds 3 sessions at most: a fourth is refused to either client with the same typed error."""
    script = recorded["PointMaze_Large-v3"][0]
    episode = tmp_path / "episode.txt"
    episode.write_text("\n".join(script[:script.index("end")]) + "\n")
    bundle = ROOT / "models" / "PointMaze_Large-v3"
    limit = ["--max-sessions", "3"]  # the drive's and the two resuming episodes'
    server = LocalServer(bundle, extra_args=limit).start()
    port = server.wait_ready()
    restarted = None
    drive = _Lines([str(programs / "l3p_drive"), "--target", f"127.0.0.1:{port}", "--episode", str(episode),
                    "--rate", "50", "--seconds", "300", "--max-age", "0.5", "--on-fault", "last"])
    resuming = [_Replay([str(programs / "l3p_replay"), "--target", f"127.0.0.1:{port}", "--resume", *unary])
                for unary in ([], ["--unary"])]
    try:
        for replay in resuming:
            replay.send(script[0])
            assert [replay.send(line)["step"] for line in script[1:3]] == [0, 1]
        acting = drive.wait_for(lambda line: re.search(r" act step 1\d ", line) is not None, 60)
        with PlannerClient(f"127.0.0.1:{port}") as client:
            refused = [python_replay(client, script[:1], unary) for unary in (False, True)]
        assert refused[0] == refused[1] and refused[0][0]["error"] == "ResourceExhausted"
        for unary in (False, True):
            assert cpp_replay(programs, ["--target", f"127.0.0.1:{port}"], script[:1], unary) == refused[0]
        server.proc.kill()
        server.proc.wait()
        held = drive.wait_for(lambda line: " hold Control: UNAVAILABLE" in line, 60)
        restarted = LocalServer(bundle, port=port, extra_args=limit).start()
        assert restarted.wait_ready() == port
        back = drive.wait_for(lambda line: " act " in line, 60)
        drive.stop()
        resumed = [replay.send(script[3]) for replay in resuming]
    finally:
        drive.proc.kill()
        for replay in resuming:
            replay.proc.kill()
        server.stop()
        if restarted is not None:
            restarted.stop()
    assert drive.proc.returncode == 0
    lines = drive.lines
    assert lines[0].startswith("model PointMaze_Large-v3 (PointMaze_Large-v3): obs 4, goal 2, action 2")
    ticks = [line for line in lines if line.startswith("tick ")]
    assert all(" act " in line for line in lines[acting - 5:acting + 1])
    assert all(" hold " in line for line in lines[held:back])  # nothing to act on while it is down
    ages = [float(m[1]) for line in ticks if (m := re.search(r" age ([\d.]+) ms ", line))]
    assert ages and max(ages) <= 500.0  # never a stale action
    assert int(re.search(r" act step (\d+) ", lines[back])[1]) < 10  # a new session
    summary = dict(field.split("=") for field in lines[-1].split()[1:])
    assert int(summary["reconnects"]) >= 1 and int(summary["faults"]) >= 1
    assert int(summary["ticks"]) == len(ticks) and int(summary["holds"]) >= back - held
    for step in resumed:
        assert (step["resumed"], step["step"], step["replanned"]) == (True, 0, True)
    assert resumed[0]["action"] == resumed[1]["action"]
