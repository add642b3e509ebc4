"""ROS 2 test and benchmark harness: every DDS process inside a network namespace of its own.

``in_netns(argv)`` runs a command in a new network namespace with only a multicast-capable loopback
(DDS discovery never reaches the machine's interfaces). Inside it, ``python tests/ros2_harness.py
SCENARIO JSON`` runs one scenario: a real planner server (``LocalServer``), the bridge and the
simulated robot as separate processes (``l3p ros2 ...``), and this process as a third rclpy
participant that introspects and drives them. It prints one JSON line (``RESULT {...}``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
NETNS_SETUP = "ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo"
RESULT = "RESULT "


def netns_unavailable() -> str | None:
    """Why ROS 2 scenarios cannot run here, or None."""
    for module in ("rclpy", "std_msgs", "sensor_msgs", "geometry_msgs", "diagnostic_msgs", "nav_msgs"):
        if importlib.util.find_spec(module) is None:
            return f"the ROS 2 wheels are not installed (no {module}): pip install '.[ros2]'"
    if os.geteuid() != 0:
        return "needs root to make a network namespace (unshare -n) for DDS discovery"
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed"
    probe = subprocess.run(["unshare", "-n", "bash", "-c", NETNS_SETUP], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make a network namespace: {probe.stderr.strip()[-200:]}"
    return None


def child_env() -> dict[str, str]:
    """The environment of every process of a scenario: one BLAS thread, no GL (nothing renders)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", L3P_IN_NETNS="1")
    env.pop("MUJOCO_GL", None)  # the sim robot never renders; a missing GL backend must not break import
    env.pop("PYOPENGL_PLATFORM", None)
    env["PATH"] = env.get("PATH", "") + ":/usr/sbin:/sbin"
    return env


def in_netns(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    """``argv`` in a new network namespace, in a process group of its own: on a timeout the whole
    group (the scenario and every process it started) is killed, then TimeoutExpired is raised."""
    script = f"{NETNS_SETUP} && exec " + " ".join(_quote(a) for a in argv)
    proc = subprocess.Popen(["unshare", "-n", "bash", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{argv[-2:]} ran past {timeout_s:g} s; killed.\n{out[-3000:]}\n{err[-5000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def run_scenario(name: str, params: dict[str, Any], timeout_s: float = 300, script: str | Path | None = None
                 ) -> dict[str, Any]:
    """Run scenario ``name`` of ``script`` (default this file) in its own network namespace; its
    RESULT, or AssertionError with its output."""
    script = Path(script or __file__).resolve()
    proc = in_netns([sys.executable, str(script), name, json.dumps(params)], timeout_s)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"scenario {name} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-6000:]}")
    return json.loads(lines[-1][len(RESULT):])


# --------------------------------------------------------------------------- processes (inside the namespace)


def l3p(*args: str) -> list[str]:
    return [sys.executable, "-m", "l3p", *args]


class Process:
    """A child process whose output is kept (drained by a thread) and which is always stopped."""

    def __init__(self, argv: list[str], name: str) -> None:
        self.name = name
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=child_env(), cwd=ROOT)
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if "READY" in line:
                self.ready.set()

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        if not self.ready.wait(timeout_s):
            self.stop()
            raise RuntimeError(f"{self.name} did not get ready:\n{self.output()}")

    def wait_for(self, text: str, timeout_s: float = 60.0) -> None:
        """Until a line of the output contains ``text``."""
        deadline = time.monotonic() + timeout_s
        while not any(text in line for line in self.lines):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{self.name} never printed {text!r}:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        return "".join(self.lines[-60:])

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._pump.join(2.0)
        return self.proc.returncode


def bridge_process(config: dict[str, Any], workdir: Path, name: str = "bridge",
                   ros_args: list[str] = ()) -> tuple[Process, Path]:
    """``l3p ros2 bridge`` with ``config`` (written as YAML, as a ROS 2 parameters file); its stats path."""
    import yaml

    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"l3p_bridge": {"ros__parameters": config}}))
    stats = workdir / f"{name}-stats.json"
    argv = l3p("ros2", "bridge", "--config", str(path), "--stats", str(stats))
    proc = Process(argv + (["--ros-args", *ros_args] if ros_args else []), name)
    proc.wait_ready()
    return proc, stats


def start_server(bundle: Path, port: int = 0) -> Any:
    from l3p.serving.local_server import LocalServer

    server = LocalServer(bundle, port=port, env=child_env())
    server.start()
    server.wait_ready(120)
    return server


class Probe:
    """This process as a ROS 2 participant: sees the graph, records topics (decoded, and raw CDR
    bytes), publishes what a robot would."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        self.rclpy = rclpy
        self.node = rclpy.create_node("l3p_probe")
        self.messages: dict[str, list[tuple[float, Any]]] = {}
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def record(self, topic: str, msg_type: type, raw: bool = False) -> list[tuple[float, Any]]:
        from rclpy.qos import QoSProfile

        store = self.messages.setdefault(topic + (":raw" if raw else ""), [])
        self.node.create_subscription(msg_type, topic, lambda m: store.append((time.monotonic(), m)),
                                      QoSProfile(depth=1000), raw=raw)
        return store

    def publisher(self, topic: str, msg_type: type) -> Any:
        from rclpy.qos import QoSProfile

        return self.node.create_publisher(msg_type, topic, QoSProfile(depth=10))

    def wait_for(self, predicate: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.02)

    def topics(self) -> dict[str, list[str]]:
        return dict(self.node.get_topic_names_and_types())

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.rclpy.try_shutdown()


def status_values(msg: Any) -> dict[str, str]:
    return {kv.key: kv.value for kv in msg.values}


# --------------------------------------------------------------------------- the gRPC reference


class RecordingClient:
    """A PlannerClient whose episodes keep every action they return (for comparing with the bridge)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.actions: list[list[list[float]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _wrap(self, episode: Any) -> Any:
        record = self.actions
        record.append([])

        class Recorded:
            def __enter__(self_inner) -> Any:
                episode.__enter__()
                return self_inner

            def __exit__(self_inner, *exc: Any) -> Any:
                return episode.__exit__(*exc)

            def act(self_inner, obs: Any, **kw: Any) -> Any:
                step = episode.act(obs, **kw)
                record[-1].append(np.asarray(step.action, np.float32).tolist())
                return step

            @property
            def resumes(self_inner) -> int:
                return episode.resumes

        return Recorded()

    def episode(self, *a: Any, **kw: Any) -> Any:
        return self._wrap(self._client.episode(*a, **kw))

    def stream_episode(self, *a: Any, **kw: Any) -> Any:
        return self._wrap(self._client.stream_episode(*a, **kw))


def grpc_reference(target: str, env_id: str, episodes: int, seed: int, pairs: str = "random",
                   min_cells: int | None = None, max_steps: int | None = None, stream: bool = True) -> dict[str, Any]:
    """What ``l3p eval`` does for mode l3p on these seeds (its own ``run_episodes``), with the actions."""
    from l3p.clients.client import PlannerClient
    from l3p.clients.runner import open_env, run_episodes
    from l3p.sim import mazes
    from l3p.sim.render import close_env

    client = RecordingClient(PlannerClient(target))
    env = open_env(env_id, max_steps=max_steps)
    try:
        run = run_episodes(client, env, env_id, episodes=episodes, seed=seed, mode="l3p", stream=stream,
                           pairs=pairs, min_cells=min_cells or mazes.MIN_FAR_CELLS)
    finally:
        close_env(env)
        client.close()
    return {"successes": [e.success for e in run.episodes], "reached_at": [e.reached_at for e in run.episodes],
            "actions": client.actions,
            "latencies_s": run.latencies_s}


# --------------------------------------------------------------------------- scenarios


def bridge_config(server: str, **more: Any) -> dict[str, Any]:
    return {"server": server, "observation_timeout_s": 2.0, **more}


def compare(sim_episodes: list[dict[str, Any]], ref: dict[str, Any]) -> dict[str, Any]:
    """Successes (at the last step and first reached) and actions of the ROS 2 run against the gRPC reference."""
    same_success = [e["success"] for e in sim_episodes] == ref["successes"]
    same_reached = [e["reached_at"] for e in sim_episodes] == ref["reached_at"]
    max_diff, same_length = 0.0, True
    for e, ref_actions in zip(sim_episodes, ref["actions"]):
        a = np.asarray(e["actions"], np.float32)
        b = np.asarray(ref_actions, np.float32)
        if a.shape != b.shape:
            same_length = False
            continue
        max_diff = max(max_diff, float(np.max(np.abs(a - b))) if a.size else 0.0)
    return {"same_successes": same_success, "same_reached": same_reached, "same_lengths": same_length,
            "max_action_diff": max_diff,
            "ros2_successes": int(sum(e["success"] for e in sim_episodes)),
            "grpc_successes": int(sum(ref["successes"]))}


def scenario_lockstep(p: dict[str, Any]) -> dict[str, Any]:
    """Bridge + sim robot in lockstep on the same seeds as the gRPC runner; introspected by this
    process, the action bytes checked against rosbags; the recording read back."""
    from diagnostic_msgs.msg import DiagnosticStatus
    from std_msgs.msg import Float64MultiArray

    bundle = MODELS / p["model"]
    work = Path(tempfile.mkdtemp(prefix="l3p-ros2-"))
    server = start_server(bundle)
    probe = Probe()
    ns = p.get("namespace", "/arm")
    config = bridge_config(server.target, seed=p["seed"], robots=[ns], record=str(work / "rec.npz"),
                           achieved_goal_indices=p["achieved"], topics={"success": "success"},
                           goal={"type": p.get("goal_type", "point"), "indices": p.get("goal_indices", [])})
    try:
        raw_actions = probe.record(f"{ns}/forward_command_controller/commands", Float64MultiArray, raw=True)
        statuses = probe.record(f"{ns}/status", DiagnosticStatus)
        bridge, stats_path = bridge_process(config, work)
        try:
            probe.wait_for(lambda: f"{ns}/subgoal" in probe.topics(), 20, "the bridge's topics")
            sim_args = ["ros2", "sim", "--env", p["env_id"], "--namespace", ns, "--episodes", str(p["episodes"]),
                        "--seed", str(p["seed"]), "--out", str(work / "sim.json"), "--pairs", p.get("pairs", "random"),
                        "--goal-type", "point" if p.get("goal_type", "point") == "point" else "array"]
            if p.get("max_steps"):
                sim_args += ["--max-steps", str(p["max_steps"])]
            sim = subprocess.run(l3p(*sim_args), capture_output=True, text=True, env=child_env(), cwd=ROOT,
                                 timeout=p.get("timeout_s", 600))
            if sim.returncode != 0:
                raise AssertionError(f"sim failed:\n{sim.stdout[-2000:]}\n{sim.stderr[-4000:]}\n"
                                     f"bridge:\n{bridge.output()}")
            graph = probe.topics()
            time.sleep(0.3)  # the last messages in flight
        finally:
            bridge_rc = bridge.stop()
        sim_result = json.loads((work / "sim.json").read_text())
        ref = grpc_reference(server.target, p["env_id"], p["episodes"], p["seed"], pairs=p.get("pairs", "random"),
                             max_steps=p.get("max_steps"))
        time.sleep(0.3)
        # An independent CDR implementation (rosbags) reads the bridge's bytes and writes the same bytes.
        from rosbags.typesys import Stores, get_typestore

        store = get_typestore(Stores.ROS2_KILTED)
        decoded, bytes_equal = [], True
        for _, raw in raw_actions:
            msg = store.deserialize_cdr(bytes(raw), "std_msgs/msg/Float64MultiArray")
            decoded.append(msg.data.tolist())
            bytes_equal &= store.serialize_cdr(msg, "std_msgs/msg/Float64MultiArray") == bytes(raw)
        applied = [a for e in sim_result["episodes"] for a in e["actions"]]
        from l3p.core.dataset import load_dataset

        data = load_dataset(work / "rec.npz")
        last_status = status_values(statuses[-1][1]) if statuses else {}
        return {
            "topics": {k: v for k, v in graph.items() if k.startswith(ns)},
            "bridge_exit": bridge_rc,
            "sim": {k: v for k, v in sim_result.items() if k != "episodes"},
            "sim_successes": [e["success"] for e in sim_result["episodes"]],
            "steps": [e["steps"] for e in sim_result["episodes"]],
            "compare": compare(sim_result["episodes"], ref),
            "rosbags": {"messages": len(decoded), "bytes_equal": bool(bytes_equal),
                        # in lockstep every action message is applied, then the hold at shutdown
                        "matches_applied": decoded[:len(applied)] == applied,
                        "after": decoded[len(applied):]},
            "dataset": {"steps": int(len(data.terminals)), "episodes": len(data.episode_bounds()),
                        "obs_dim": int(data.observations.shape[1]), "env_id": data.env_id,
                        "actions_match": bool(np.array_equal(data.actions, np.asarray(applied, np.float32))),
                        "extras": sorted(data.extras), "made_by": data.metadata["made_by"]},
            "last_status": last_status,
            "last_status_level": int.from_bytes(statuses[-1][1].level, "little") if statuses else -1,
            "stats": json.loads(stats_path.read_text()),
            "grpc_latency_s": ref["latencies_s"],
        }
    finally:
        probe.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def scenario_faults(p: dict[str, Any]) -> dict[str, Any]:
    """This process is the robot (JointState observations at a fixed rate): bad messages, the server
    killed and restarted mid-episode, the observations stopping, SIGTERM."""
    from diagnostic_msgs.msg import DiagnosticStatus
    from geometry_msgs.msg import PointStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from l3p.clients.ros2.convert import HOLD_LABEL, point_message

    bundle = MODELS / "FetchPush-v4"
    manifest = json.loads((bundle / "manifest.json").read_text())
    obs_dim = int(manifest["dims"]["obs"])
    low, high = np.array(manifest["action_low"]), np.array(manifest["action_high"])

    def valid(action: np.ndarray) -> bool:
        return bool(action.shape == low.shape and np.all(np.isfinite(action))
                    and np.all((low <= action) & (action <= high)))
    joints = [f"joint_{i}" for i in range(obs_dim)]
    work = Path(tempfile.mkdtemp(prefix="l3p-ros2-"))
    server = start_server(bundle)
    port = server.port
    timeout = p["observation_timeout_s"]
    # The robot's namespace from ROS's own remapping (the node's namespace), not the bridge's settings.
    config = bridge_config(server.target, observation_timeout_s=timeout,
                           observation={"type": "joint_state", "joints": joints, "fields": ["position"]},
                           act_timeout_s=0.5)
    probe = Probe()
    events: list[tuple[float, str, Any]] = []  # (time, what, detail), in order
    lock = threading.Lock()

    def log(what: str, detail: Any = None) -> None:
        with lock:
            events.append((time.monotonic(), what, detail))

    actions = probe.record("/arm/forward_command_controller/commands", Float64MultiArray)
    statuses = probe.record("/arm/status", DiagnosticStatus)
    pub_obs = probe.publisher("/arm/observation", JointState)
    pub_goal = probe.publisher("/arm/goal", PointStamped)
    rng = np.random.default_rng(0)
    obs = rng.normal(0, 0.1, obs_dim)
    order = rng.permutation(obs_dim)  # names sent shuffled: the bridge maps them by name

    def joint_state(values: np.ndarray, names: list[str] | None = None) -> JointState:
        msg = JointState()
        msg.name = [joints[i] for i in order] if names is None else names
        msg.position = [float(values[i]) for i in order] if names is None else [float(v) for v in values]
        return msg

    publishing = threading.Event()
    sending = threading.Lock()  # held while the robot publishes
    stop_all = threading.Event()

    def pause() -> None:
        """The robot stops publishing: once this returns, no observation of its is under way."""
        publishing.clear()
        with sending:
            pass

    def from_hold(received: list) -> list:
        """The commands from the first hold on: those before it answered observations sent earlier
        (the bridge answers each one it took, however late the probe hears it)."""
        first = next((k for k, (_, a) in enumerate(received) if [d.label for d in a.layout.dim] == [HOLD_LABEL]),
                     len(received))
        return [a.data.tolist() for _, a in received[first:]]

    goal = point_message([1.3, 0.75, 0.42], "world")

    def robot() -> None:
        tick = 0
        while not stop_all.is_set():
            with sending:
                if publishing.is_set():
                    if tick % 10 == 0:
                        pub_goal.publish(goal)  # re-sent, as robots do: the same goal goes on
                    pub_obs.publish(joint_state(obs))
                    tick += 1
            time.sleep(1.0 / p["rate_hz"])

    robot_thread = threading.Thread(target=robot, daemon=True)
    bridge = None
    try:
        bridge, stats_path = bridge_process(config, work, ros_args=["-r", "__ns:=/arm"])
        probe.wait_for(lambda: "/arm/status" in probe.topics(), 20, "the bridge's status topic")
        n = lambda store: len(store)  # noqa: E731
        # A goal, then observations: actions come.
        robot_thread.start()
        publishing.set()
        probe.wait_for(lambda: n(actions) >= 10, 30, "actions")
        # Malformed observations and goals while the robot pauses: a status naming each.
        pause()
        status_mark = n(statuses)
        bad_nan = obs.copy()
        bad_nan[4] = float("nan")
        wrong_len = JointState()
        wrong_len.name = joints
        wrong_len.position = [0.0] * (obs_dim - 1)
        lacks_joints = joint_state(np.zeros(3), names=joints[:3])
        bad_goal = point_message([float("inf"), 0.0, 0.0], "world")

        def bad_statuses() -> list:
            return [s for _, s in statuses[status_mark:] if s.message.startswith("bad")]

        # Each after the last one's status: the bridge keeps only the newest observation (depth 1),
        # so one sent while it is busy acting would replace the one before, unread.
        for k, (pub, msg) in enumerate(((pub_obs, lacks_joints), (pub_obs, joint_state(bad_nan)),
                                        (pub_obs, wrong_len), (pub_goal, bad_goal)), 1):
            pub.publish(msg)
            probe.wait_for(lambda: len(bad_statuses()) >= k, 20, f"bad-message status {k}")
        # A status after them (the heartbeat, or the hold of no good observation) says whether any
        # was answered: the step count the bad ones' statuses show has not moved.
        last_bad = max(i for i, (_, s) in enumerate(statuses) if s.message.startswith("bad"))
        probe.wait_for(lambda: n(statuses) > last_bad + 1, 20, "a status after the bad messages")
        bad = [(int.from_bytes(s.level, "little"), s.message) for s in bad_statuses()]
        steps_during_bad = sorted({status_values(s)["step"] for s in [*bad_statuses(), statuses[last_bad + 1][1]]})
        publishing.set()
        mark_good = n(actions)
        probe.wait_for(lambda: n(actions) >= mark_good + 5, 20, "actions after the bad messages")
        # The server killed mid-episode, then restarted on its port.
        mark_kill = n(actions)
        status_kill = n(statuses)
        episode_before = status_values(statuses[-1][1]).get("episode")
        server.proc.kill()
        server.stop()
        t_kill = time.monotonic()
        probe.wait_for(lambda: any(status_values(s).get("server") == "unavailable" for _, s in statuses[status_kill:]),
                       20, "a server-unavailable status")
        time.sleep(1.0)  # the robot keeps sending observations to a bridge without a server
        down_all = actions[mark_kill:]
        server = start_server(bundle, port=port)
        t_restart = time.monotonic()
        probe.wait_for(lambda: n(actions) >= mark_kill + len(down_all) + 5, 30, "actions after the restart")
        after = actions[mark_kill + len(down_all):]
        resumed_status = [status_values(s) for _, s in statuses[status_kill:]]
        # The observations stop: a hold, once.
        pause()
        mark_stop = n(actions)
        probe.wait_for(lambda: any(status_values(s).get("state") == "observation_timeout"
                                   for _, s in statuses[status_kill:]), 10, "an observation-timeout status")
        time.sleep(timeout * 2)
        after_stop = actions[mark_stop:]
        # SIGTERM: the session ends, the hold is published once.
        mark_term = n(actions)
        publishing.set()
        probe.wait_for(lambda: n(actions) >= mark_term + 3, 20, "actions before SIGTERM")
        mark_term = n(actions)
        bridge_rc = bridge.stop()
        probe.wait_for(lambda: from_hold(actions[mark_term:]), 10, "the hold of SIGTERM")
        time.sleep(0.5)  # anything more the bridge sent before it exited
        term = from_hold(actions[mark_term:])
        final = status_values(statuses[-1][1])
        return {
            "bad_statuses": bad,
            "steps_during_bad": steps_during_bad,
            "all_actions_valid": all(valid(np.asarray(a.data)) for _, a in actions),
            "down": from_hold(down_all),
            "first_after_restart_delay_s": (after[0][0] - t_restart) if after else None,
            "after_restart_nonzero": sum(any(v != 0 for v in a.data) for _, a in after),
            "episodes_seen": sorted({s.get("episode") for s in resumed_status}),
            "episode_before": episode_before,
            "resumes": max(int(s.get("resumes", 0)) for s in resumed_status),
            "after_stop": from_hold(after_stop),
            "term": term,
            "bridge_exit": bridge_rc,
            "final_status": final,
            "kill_to_restart_s": t_restart - t_kill,
            "action_dim": len(actions[0][1].data),
        }
    except AssertionError as err:
        last = [(s.message, status_values(s)) for _, s in statuses[-5:]]
        raise AssertionError(f"{err}; last statuses {last}; bridge:\n{bridge.output() if bridge else ''}") from None
    finally:
        stop_all.set()
        if bridge is not None:
            bridge.stop()
        probe.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def scenario_protocol(p: dict[str, Any]) -> dict[str, Any]:
    from ros2_protocol import scenario_protocol as protocol  # its own module (this one is long enough)

    return protocol(p)


SCENARIOS = {"lockstep": scenario_lockstep, "faults": scenario_faults, "protocol": scenario_protocol}


if __name__ == "__main__":
    name, params = sys.argv[1], json.loads(sys.argv[2])
    result = SCENARIOS[name](params)
    print(RESULT + json.dumps(result), flush=True)
