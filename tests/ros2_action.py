"""The ``action`` scenario (tests/test_ros2_action.py; benchmarks/ros2_action.py measures with it): the
bridge's ReachGoal action against one real planner server, every process in one network namespace
(tests/ros2_harness.py):

- ``/arm`` (FetchPush-v4) and ``/base`` (PointMaze_Large-v3, far pairs): ``l3p ros2 sim --goal-action``,
  whose rclpy ActionClient sends each episode's goal (held-out seeds) and ends the episode on the result;
- ``/probe`` (FetchPush-v4, planner mode ``policy``: action = pi(observation, goal), so every action
  tells its goal): this process is the robot (one observation, at RATE_HZ) and an ActionClient sending
  goals that are rejected, cancelled, replaced, timed out, or reached at once;
- last, the server killed and restarted on its port during a ``/base`` goal.

Prints ``RESULT {...}`` (tests/ros2_harness.py runs it as ``python tests/ros2_action.py action JSON``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from ros2_harness import MODELS, RESULT, Probe, bridge_config, bridge_process, child_env, l3p, status_values

RATE_HZ = 50.0  # the probe robot's and the simulators' control rate
WAIT_S = 30.0  # the longest wait for anything the bridge owes
OBS = np.zeros(25)
OBS[3:6] = [1.3, 0.75, 0.42]  # the probe's object: its achieved goal
GOALS = {"a": [1.45, 0.9, 0.42], "b": [1.15, 0.6, 0.42]}  # both > 0.05 from it
ROBOTS = {  # namespace: (model, achieved goal indices, tolerance: the env's success distance)
    "/arm": ("FetchPush-v4", [3, 4, 5], 0.05),
    "/base": ("PointMaze_Large-v3", [0, 1], 0.45),
    "/probe": ("FetchPush-v4", [3, 4, 5], 0.05),
}


def serve(models: Path, port: int = 0) -> Any:
    from l3p.serving.local_server import LocalServer

    server = LocalServer(models=models, port=port, env=child_env())
    server.start()
    server.wait_ready(120)
    return server


def wait(predicate: Any, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def done(future: Any, what: str) -> Any:
    wait(future.done, what)
    return future.result()


def sim(ns: str, env_id: str, episodes: int, seed: int, out: Path, *more: str) -> subprocess.Popen:
    argv = l3p("ros2", "sim", "--env", env_id, "--namespace", ns, "--goal-action", "--rate", str(RATE_HZ),
               "--episodes", str(episodes), "--seed", str(seed), "--out", str(out), *more)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env())


def finished(proc: subprocess.Popen, out: Path, timeout_s: float) -> list[dict[str, Any]]:
    """The sim's episodes: goal, result and feedback counts."""
    log, _ = proc.communicate(timeout=timeout_s)
    if proc.returncode != 0:
        raise AssertionError(f"sim failed:\n{log[-3000:]}")
    return [{"seed": e["env_seed"], "result": e["result"], "feedback": e["feedback"], "steps": e["steps"]}
            for e in json.loads(out.read_text())["episodes"]]


class ProbeRobot:
    """This process as ``/probe``: its observation at RATE_HZ, its commands with their source stamps, an
    ActionClient."""

    def __init__(self, probe: Probe, reach_goal: Any) -> None:
        from diagnostic_msgs.msg import DiagnosticStatus
        from rclpy.action import ActionClient
        from rclpy.qos import QoSProfile
        from std_msgs.msg import Float64MultiArray

        from l3p.clients.ros2.convert import array_message

        self.type = reach_goal
        self.commands: list[dict[str, Any]] = []  # in order: source stamp (ns), hold?, values
        probe.node.create_subscription(Float64MultiArray, "/probe/forward_command_controller/commands",
                                       self._on_command, QoSProfile(depth=1000))
        self.statuses = probe.record("/probe/status", DiagnosticStatus)
        self.client = ActionClient(probe.node, reach_goal, "/probe/reach_goal")
        self._pub = probe.publisher("/probe/observation", Float64MultiArray)
        self._obs = array_message(OBS)
        self.observations = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_command(self, msg: Any, info: Any) -> None:
        self.commands.append({"stamp": info["source_timestamp"], "hold": [d.label for d in msg.layout.dim] == ["hold"],
                              "data": list(msg.data)})

    def _run(self) -> None:
        while not self._stop.wait(1.0 / RATE_HZ):
            self._pub.publish(self._obs)
            self.observations += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def goal(self, values: list[float], frame: str = "world", **limits: Any) -> Any:
        msg = self.type.Goal(goal=values, **limits)
        msg.header.frame_id = frame
        return done(self.client.send_goal_async(msg), "a goal response")

    def after(self, mark: int, n: int) -> None:
        wait(lambda: len(self.commands) >= mark + n, f"{n} commands")

    def quiet(self, seconds: float, mark: int | None = None) -> list[dict[str, Any]]:
        """The commands from ``mark`` (default: now) to ``seconds`` of observations later."""
        mark, seen = len(self.commands) if mark is None else mark, self.observations
        time.sleep(seconds)
        assert self.observations - seen >= seconds * RATE_HZ / 2
        return self.commands[mark:]


def result_of(handle: Any) -> dict[str, Any]:
    r = done(handle.get_result_async(), "a result")
    return {"status": r.status, "outcome": r.result.outcome, "message": r.result.message, "steps": r.result.steps,
            "final_distance": r.result.final_distance}


def cancel(robot: ProbeRobot) -> dict[str, Any]:
    """A goal cancelled after 10 actions: its commands, and those from the cancel request on."""
    start = len(robot.commands)
    handle = robot.goal(GOALS["a"])
    robot.after(start, 10)
    mark = len(robot.commands)
    cancelled = done(handle.cancel_goal_async(), "the cancel response")
    return {"accepted": len(cancelled.goals_canceling) == 1, "result": result_of(handle),
            "before": robot.commands[start:mark], "after": robot.quiet(0.3, mark)}


def preempt(robot: ProbeRobot) -> dict[str, Any]:
    """Goal a replaced by goal b after 10 actions: the commands from 2 s before b's acceptance on."""
    first = robot.goal(GOALS["a"])
    robot.after(len(robot.commands), 10)
    second = robot.goal(GOALS["b"])
    accepted_ns = second.stamp.sec * 1_000_000_000 + second.stamp.nanosec
    robot.after(len(robot.commands), 10)
    out = {"first": result_of(first), "accepted_ns": accepted_ns,
           "commands": [c for c in robot.commands if c["stamp"] > accepted_ns - 2_000_000_000]}
    done(second.cancel_goal_async(), "the cancel response")
    out["second"] = result_of(second)
    return out


def probe_goals(robot: ProbeRobot, target: str, trials: int) -> dict[str, Any]:
    """Rejected goals, goals cancelled and replaced (``trials`` each), goals timed out, a goal reached at once."""
    from l3p.clients.client import PlannerClient

    client = PlannerClient(target, model="FetchPush-v4")
    policy = {}
    for name, goal in GOALS.items():
        with client.episode(goal, mode="policy") as ep:
            policy[name] = ep.act(OBS).action.astype(np.float64).tolist()
    client.close()
    out: dict[str, Any] = {"policy": policy, "before_any_goal": robot.quiet(0.3)}
    status_mark = len(robot.statuses)
    out["rejected"] = [robot.goal(g, frame).accepted for g, frame in
                       (([1.0, 2.0], "world"), ([float("nan"), 0.7, 0.4], "world"), (GOALS["a"], "map"))]
    wait(lambda: sum(int.from_bytes(s.level, "little") == 2 for _, s in robot.statuses[status_mark:]) >= 3,
         "the rejections' statuses")
    out["rejected_statuses"] = [s.message for _, s in robot.statuses[status_mark:]
                                if int.from_bytes(s.level, "little") == 2]
    out["cancel"] = [cancel(robot) for _ in range(trials)]
    out["preempt"] = [preempt(robot) for _ in range(trials)]
    # Limits, and a goal where the robot already is.
    mark = len(robot.commands)
    out["max_steps"] = {"result": result_of(robot.goal(GOALS["a"], max_steps=5)), "commands": robot.commands[mark:]}
    out["timeout"] = result_of(robot.goal(GOALS["b"], timeout_s=0.3))
    mark = len(robot.commands)
    out["at_goal"] = {"result": result_of(robot.goal(OBS[3:6].tolist())), "commands": robot.commands[mark:]}
    out["final_status"] = status_values(robot.statuses[-1][1])
    return out


def type_hash(probe: Probe, topic: str) -> str:
    info = probe.node.get_publishers_info_by_topic(topic)
    h = info[0].topic_type_hash
    return f"RIHS{h.version:02d}_{bytes(h.value).hex()}"


def restart_during_goal(server: Any, models: Path, p: dict[str, Any], work: Path,
                        commands: list[dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """A /base goal; after 30 of its actions the server is killed (its workers finish what they have in
    hand first) and, a second after the bridge held the robot, restarted on its port."""
    port, mark = server.port, len(commands)
    proc = sim("/base", "PointMaze_Large-v3", 1, p["seed"] + p["base_episodes"], work / "restart.json",
               "--pairs", "far", "--max-steps", str(p["restart_max_steps"]))
    wait(lambda: len(commands) >= mark + 30, "30 /base actions", 120)
    killed = len(commands)  # before the kill: stopping waits on the server's output, the hold may come first
    server.proc.kill()
    server.stop()
    wait(lambda: any(c["hold"] for c in commands[killed:]), "the hold once the server is gone")
    held = next(i for i in range(killed, len(commands)) if commands[i]["hold"]) + 1
    time.sleep(1.0)  # the robot goes on sending observations to a bridge without a server
    down = len(commands) - held
    server = serve(models, port)
    episodes = finished(proc, work / "restart.json", 300)
    return server, {"episode": episodes[0], "commands_while_down": down,
                    "actions_after_restart": sum(not c["hold"] for c in commands[held:])}


def scenario_action(p: dict[str, Any]) -> dict[str, Any]:
    from rclpy.qos import QoSProfile
    from std_msgs.msg import Float64MultiArray

    from l3p.clients.ros2.action_type import reach_goal_type

    work = Path(tempfile.mkdtemp(prefix="l3p-ros2-action-"))
    models = work / "models"
    models.mkdir()
    for name in {model for model, _, _ in ROBOTS.values()}:  # a repository never follows a symbolic link
        shutil.copytree(MODELS / name, models / name)
    server = serve(models)
    probe = Probe()
    base_commands: list[dict[str, Any]] = []
    probe.node.create_subscription(Float64MultiArray, "/base/forward_command_controller/commands",
                                   lambda m: base_commands.append({"hold": bool(m.layout.dim)}), QoSProfile(depth=1000))
    bridges = []
    try:
        for ns, (model, achieved, tolerance) in ROBOTS.items():
            config = bridge_config(server.target, model=model, robots=[ns], seed=p["seed"], achieved_goal_indices=achieved,
                                   goal_action={"enabled": True, "tolerance": tolerance},
                                   planner="policy" if ns == "/probe" else "l3p")
            bridges.append(bridge_process(config, work, name=ns.strip("/"))[0])
        started = time.monotonic()
        runs = {"/arm": sim("/arm", "FetchPush-v4", p["fetch_episodes"], p["seed"], work / "arm.json"),
                "/base": sim("/base", "PointMaze_Large-v3", p["base_episodes"], p["seed"], work / "base.json",
                             "--pairs", "far", "--max-steps", "800")}
        out: dict[str, Any] = {}
        if p["probe"]:
            robot = ProbeRobot(probe, reach_goal_type())
            assert robot.client.wait_for_server(timeout_sec=WAIT_S)
            out["probe"] = probe_goals(robot, server.target, p["trials"])
            robot.close()
            out["type_hash"] = type_hash(probe, "/probe/reach_goal/_action/feedback")
        out["episodes"] = {ns: finished(proc, work / f"{ns.strip('/')}.json", p["timeout_s"])
                           for ns, proc in runs.items()}
        out["episodes_s"] = time.monotonic() - started
        if p["restart"]:
            server, out["restart"] = restart_during_goal(server, models, p, work, base_commands)
        return out
    except AssertionError as err:
        outputs = "\n".join(f"{b.name}:\n{b.output()}" for b in bridges)
        raise AssertionError(f"{err}\n{outputs}\nfailed: {err}") from None  # last too: the harness shows the tail
    finally:
        for bridge in bridges:
            bridge.stop()
        probe.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    result = {"action": scenario_action}[sys.argv[1]](json.loads(sys.argv[2]))
    print(RESULT + json.dumps(result), flush=True)
