"""The loop from a robot's recordings to a served planner, over ROS 2, at test size (issue 45's point
3), inside a network namespace the test makes (tests/ros2_harness.py):

1. a scripted noisy controller (not the planner) drives `l3p ros2 sim` on PointMaze_Large-v3 along
   short segments (a target <= 4 cells away by BFS, OGBench's stitch protocol: the unit vector toward
   the next cell on a shortest path plus N(0, 0.5) noise), publishing each segment's target;
2. `l3p ros2 record` records observations, commands and segment targets (one episode per segment);
3. `l3p train --dataset` learns from the recording (a few updates) and exports a bundle;
4. `l3p serve` serves it and `l3p ros2 bridge` drives the same simulated robot to far goals.

At test size nothing is learned; the test checks that every stage runs on the previous one's output.
This file is also the scenario script run inside the namespace.
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

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ros2_harness import (RESULT, ROOT, Process, bridge_config, bridge_process, child_env, in_netns, l3p,  # noqa: E402
                          netns_unavailable, start_server)

REASON = netns_unavailable()
ENV = "PointMaze_Large-v3"
SEGMENT_CELLS = 4
NOISE = 0.5


class ScriptedController:
    """A ROS 2 node that drives the simulated robot like OGBench's stitch oracle: it answers the
    robot's goal handshake itself (a status naming the goal), then each observation with a command."""

    def __init__(self, namespace: str, seed: int, segment_cells: int | None = SEGMENT_CELLS) -> None:
        """``segment_cells`` None: no segments, straight for the robot's own goal (the controller's
        far-pair success, for comparison)."""
        import rclpy
        from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
        from geometry_msgs.msg import PointStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile
        from std_msgs.msg import Float64MultiArray

        from l3p.sim import mazes
        from l3p.sim.envs import make_env

        env = make_env(ENV)
        self.layout, self.scaling = mazes.maze_map(env), mazes.maze_scaling(env)
        env.close()
        self.mazes, self.KeyValue, self.DiagnosticStatus = mazes, KeyValue, DiagnosticStatus
        self.PointStamped, self.Float64MultiArray = PointStamped, Float64MultiArray
        self.rng = np.random.default_rng(seed)
        rclpy.init()
        self.rclpy = rclpy
        self.node = rclpy.create_node("scripted_controller", namespace=namespace)
        qos = QoSProfile(depth=10)
        self.pub_status = self.node.create_publisher(DiagnosticStatus, "status", qos)
        self.pub_command = self.node.create_publisher(Float64MultiArray, "forward_command_controller/commands", qos)
        self.pub_segment = self.node.create_publisher(PointStamped, "segment_goal", qos)
        self.node.create_subscription(PointStamped, "goal", self.on_goal, qos)
        self.node.create_subscription(Float64MultiArray, "observation", self.on_observation, qos)
        self.segment_cells = segment_cells
        self.goal_cell: tuple[int, int] | None = None
        self.target: tuple[int, int] | None = None
        self.segment_steps = 0
        self.segments = 0
        self.commands = 0
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def cell(self, xy: np.ndarray) -> tuple[int, int]:
        rows, cols = self.layout.shape
        return (int(round((rows - 1) / 2 - xy[1] / self.scaling)), int(round(xy[0] / self.scaling + (cols - 1) / 2)))

    def on_goal(self, msg) -> None:
        """The robot's episode goal: acknowledged as the bridge would (the controller ignores it)."""
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        status = self.DiagnosticStatus(name="scripted_controller", message="pursuing")
        status.values = [self.KeyValue(key="session", value="scripted"),
                         self.KeyValue(key="goal", value=json.dumps([msg.point.x, msg.point.y])),
                         self.KeyValue(key="goal_stamp", value=str(stamp))]
        self.pub_status.publish(status)
        self.goal_cell = self.cell(np.array([msg.point.x, msg.point.y]))
        self.target = None  # a new robot episode: a new segment from wherever it starts

    def on_observation(self, msg) -> None:
        xy = np.asarray(msg.data[:2])
        here = self.cell(xy)
        if self.segment_cells is None:
            self.target = self.goal_cell
        elif self.target is None or here == self.target or self.segment_steps >= 80:
            dist = self.mazes.bfs_cells(self.layout, here)
            ring = np.argwhere(dist == min(self.segment_cells, dist.max()))
            self.target = tuple(int(v) for v in ring[self.rng.integers(len(ring))])
            self.segment_steps = 0
            self.segments += 1
            goal = self.PointStamped()
            goal.header.frame_id = "world"
            goal.point.x, goal.point.y = (float(v) for v in self.mazes.cell_center(self.layout, self.target, self.scaling))
            self.pub_segment.publish(goal)
            time.sleep(0.002)  # the segment's target reaches the recorder before its first command
        to_target = self.mazes.bfs_cells(self.layout, self.target)
        best = here
        for di, dj in ((-1, 0), (0, -1), (1, 0), (0, 1)):
            n = (here[0] + di, here[1] + dj)
            if self.layout[n] == 0 and 0 <= to_target[n] < to_target[best]:
                best = n
        d = self.mazes.cell_center(self.layout, best, self.scaling) - xy
        action = np.clip(d / (np.linalg.norm(d) + 1e-6) + self.rng.normal(0, NOISE, 2), -1, 1)
        self.segment_steps += 1
        self.commands += 1
        self.pub_command.publish(self.Float64MultiArray(data=action.tolist()))

    def wait_for_subscribers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while min(self.pub_command.get_subscription_count(), self.pub_segment.get_subscription_count()) < 1:
            if time.monotonic() > deadline:
                raise AssertionError("the recorder never subscribed to the controller's topics")
            time.sleep(0.05)

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.rclpy.try_shutdown()


def run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv[2:6])} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc


def scenario_loop(p: dict) -> dict:
    """``p``: episodes and steps of the recording, seed, rotate_steps (the recorder's; None: its default),
    updates and train_set (``--set`` items) or train_config (a TOML file), far_episodes, far_steps and far_seed;
    controller_far: also the controller's own success on the same far pairs. Each stage's wall time is
    reported, and the bundle's dataset record (what training read) with it."""
    import yaml

    from l3p.core.dataset import load_dataset

    work = Path(p["work"]) if p.get("work") else Path(tempfile.mkdtemp(prefix="l3p-loop-"))
    work.mkdir(parents=True, exist_ok=True)
    ns, limit = "/robot", p.get("stage_timeout_s", 600)
    # What earlier runs in the same folder finished: a stage done there is not done again.
    done = json.loads((work / "stages.json").read_text()) if (work / "stages.json").exists() else {}
    seconds: dict[str, float | None] = {k: done.get(k) for k in ("record", "train")}
    mapping = {"format": "rosbag2", "env_id": ENV, "observation": [{"topic": f"{ns}/observation"}],
               "action": [{"topic": f"{ns}/forward_command_controller/commands"}], "achieved_goal_indices": [0, 1],
               "desired_goal": [{"topic": f"{ns}/segment_goal", "fields": ["point.x", "point.y"]}],
               "alignment": {"max_skew_s": 0.5, "max_gap_s": 5.0}}
    sim = l3p("ros2", "sim", "--env", ENV, "--namespace", ns)
    far = [*sim, "--max-steps", str(p.get("far_steps", p["steps"])), "--episodes", str(p.get("far_episodes", 2)),
           "--seed", str(p.get("far_seed", 1000)), "--pairs", "far"]
    # 1-2: the scripted controller drives the simulated robot; the recorder records it
    if not (work / "record.json").exists():
        if (work / "record.json.partial").exists():
            raise AssertionError(f"{work} holds a recording that did not finish: start the loop in a new folder")
        (work / "loop.yaml").write_text(yaml.safe_dump(mapping))
        t0 = time.monotonic()
        rotate = ["--rotate-steps", str(p["rotate_steps"])] if p.get("rotate_steps") else []
        recorder = Process(l3p("ros2", "record", "--mapping", str(work / "loop.yaml"), "--out", str(work / "rec.npz"),
                               "--stats", str(work / "record.json.partial"), *rotate), "recorder")
        recorder.wait_ready(60)
        controller = ScriptedController(ns, p["seed"])
        controller.wait_for_subscribers(60)  # the recorder hears the controller from its first command
        try:
            # the sim's first observation waits for both its hearers: the controller and the recorder
            run([*sim, "--max-steps", str(p["steps"]), "--episodes", str(p["episodes"]), "--seed", str(p["seed"]),
                 "--wait-subscribers", "2", "--out", str(work / "recorded.json")], limit)
            time.sleep(0.5)
        finally:
            controller.close()
            recorder.stop()
        seconds["record"] = time.monotonic() - t0
        done.update(record=seconds["record"], controller_segments=controller.segments,
                    controller_commands=controller.commands)
        (work / "stages.json").write_text(json.dumps(done))
        (work / "record.json.partial").rename(work / "record.json")  # the recording is finished
    record = json.loads((work / "record.json").read_text())
    recorded = work / "rec.npz"
    if len(record["files"]) > 1:  # the recorder's rotated files (every 20,000 steps), made one as the guide says
        recorded = work / "all.npz"
        if not recorded.exists():
            run(l3p("dataset", "import", "npz", *record["files"], "--out", str(recorded)), limit)
    data = load_dataset(recorded)
    # 3: offline training on the recording, a bundle exported (a run stopped early goes on from its checkpoint)
    if not (work / "run" / "bundle" / "manifest.json").exists():
        t0 = time.monotonic()
        if (work / "run" / "checkpoint.pt").exists():
            run(l3p("train", "--resume", str(work / "run"), "--steps", str(p["updates"]), "--no-progress"), limit)
        else:
            config = ["--config", p["train_config"]] if p.get("train_config") else []
            run(l3p("train", "--dataset", str(recorded), *config, "--out", str(work / "run"), "--steps",
                    str(p["updates"]), "--no-progress", *[a for kv in p.get("train_set", []) for a in ("--set", kv)]),
                limit)
        seconds["train"] = (seconds["train"] or 0.0) + time.monotonic() - t0  # this run's part, if resumed
        done["train"] = seconds["train"]
        (work / "stages.json").write_text(json.dumps(done))
    bundle = work / "run" / "bundle"
    manifest = json.loads((bundle / "manifest.json").read_text())
    # 4: served, and the bridge drives the same simulated robot to far goals
    t0 = time.monotonic()
    server = start_server(bundle)
    try:
        # a generous act timeout: on a loaded 2-core machine the first call (the episode start) can take seconds
        bridge, _ = bridge_process(bridge_config(server.target, robots=[ns], goal={"type": "point", "indices": [0, 1]},
                                                 act_timeout_s=5.0),
                                   work)
        try:
            run([*far, "--out", str(work / "far.json")], limit)
        except AssertionError as err:
            raise AssertionError(f"{err}\nbridge:\n{bridge.output()}") from None
        finally:
            bridge.stop()
    finally:
        server.stop()
    seconds["far_through_bridge"] = time.monotonic() - t0
    served = json.loads((work / "far.json").read_text())
    out = {"work": str(work), "controller_segments": done.get("controller_segments"),
           "controller_commands": done.get("controller_commands"),
           "record": {**{k: record[k] for k in ("steps", "episodes", "dropped", "short_episodes_left_out")},
                      "files": len(record["files"])},
           "dataset": {"steps": int(len(data.terminals)), "episodes": len(data.episode_bounds()), "env_id": data.env_id},
           "bundle_env": manifest.get("env_id"), "trained_on": manifest["provenance"]["dataset"],
           "bundle_planner": manifest["planner"], "trained_updates": manifest["provenance"]["optimizer_steps"],
           "trained_wall_s": manifest["provenance"]["wall_time_s"],
           "far_steps": [e["steps"] for e in served["episodes"]],
           "far_successes": served["successes"], "far_reached": served["reached"], "seconds": seconds}
    if p.get("controller_far"):  # the recording controller itself, straight for the same far goals
        direct = ScriptedController(ns, p["seed"], segment_cells=None)
        try:
            run([*far, "--out", str(work / "controller_far.json")], limit)
        finally:
            direct.close()
        direct_far = json.loads((work / "controller_far.json").read_text())
        out["controller_far_successes"], out["controller_far_reached"] = direct_far["successes"], direct_far["reached"]
    return out


TINY_LOOP = {"episodes": 3, "steps": 120, "seed": 0, "updates": 40, "rotate_steps": 150,
             "train_set": ["updates_per_cycle=20", "batch_size=64", "hidden=32", "layers=2", "ae_hidden=16",
                           "n_landmarks=8", "gls_sample=100", "cluster_batch=20", "landmarks_after_updates=20",
                           "eval_every_cycles=100", "eval_episodes=1", "eval_max_steps=10", "torch_threads=1",
                           "random_goal_p=0.1"]}


def loop(params: dict) -> dict:
    proc = in_netns([sys.executable, str(Path(__file__).resolve()), json.dumps(params)], 1500)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1][len(RESULT):])


@pytest.mark.slow
@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_recordings_of_a_scripted_controller_train_a_planner_the_bridge_serves():
    r = loop(TINY_LOOP)
    assert r["controller_commands"] == 3 * 120  # lockstep: one command per observation
    # every command recorded but those sent before the recorder discovered the robot, if any
    assert 300 <= r["record"]["steps"] + sum(r["record"]["dropped"].values()) + r["record"]["short_episodes_left_out"] <= 360
    assert r["dataset"]["steps"] == r["record"]["steps"] and r["dataset"]["episodes"] >= 4  # one per segment
    # the rotated files, made one: training read every recorded step
    assert r["record"]["files"] >= 2 and r["trained_on"]["steps"] == r["record"]["steps"]
    assert r["dataset"]["env_id"] == ENV and r["bundle_env"] == ENV
    assert r["far_steps"] == [120, 120]  # the bridge drove both far episodes to their end
    assert r["far_successes"] <= r["far_reached"] <= 2  # a success at the last step was reached by then


@pytest.mark.slow
@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_the_loop_in_the_same_folder_goes_on_where_the_last_one_stopped(tmp_path):
    params = {**TINY_LOOP, "work": str(tmp_path / "loop"), "far_episodes": 1}
    first = loop(params)
    assert first["work"] == params["work"] and first["trained_updates"] == 40
    shutil.rmtree(tmp_path / "loop" / "run" / "bundle")  # as if training had stopped after its last checkpoint
    second = loop({**params, "updates": 80})
    # the recording is not made again; training goes on from its checkpoint to the new budget
    assert second["seconds"]["record"] == first["seconds"]["record"] and second["record"] == first["record"]
    assert second["controller_commands"] == first["controller_commands"] == 3 * 120
    assert second["trained_updates"] == 80 and second["seconds"]["train"] > first["seconds"]["train"]
    assert second["far_steps"] == [120]


def test_the_loop_benchmark_runs_as_a_script():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "recordings_loop.py"), "--help"], capture_output=True,
                          text=True, timeout=120, cwd="/")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: recordings_loop.py"), proc.stderr


if __name__ == "__main__":
    print(RESULT + json.dumps(scenario_loop(json.loads(sys.argv[1]))), flush=True)
