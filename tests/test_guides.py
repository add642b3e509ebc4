"""The guides' command blocks run as written, so a guide cannot drift from the code.

Every ``bash`` and ``python`` block of `GUIDES` runs, in order, in one working directory per guide,
inside a network namespace of its own (tests/ros2_harness.py): the guides' ports (50051, 8000) and
DDS discovery are theirs alone, whatever else runs on the machine. The one rewrite: the guides'
placeholder host ``planner-host`` is 127.0.0.1. An HTML comment right above a block changes how it
runs, in directives separated by `` ; ``:

- ``skip: REASON``: not run (an install, a robot the test does not have), and why;
- ``setup: NAME``: `SETUPS[NAME]` first writes what the block assumes (a bag, a config file) and
  may give a bash prelude (a server to talk to) and a python prelude (the robot's own objects);
- ``drop "PREFIX": REASON``: the block's lines starting with PREFIX are not run;
- ``append "PREFIX": ARGS``: short settings, appended to the lines starting with PREFIX;
- ``background: PORT``: the block (a server) runs for the rest of the guide; the next block starts
  once PORT accepts connections;
- ``until-stopped: SECONDS``: the block's last line runs until stopped (a bridge, a recorder): it
  must still be running SECONDS after it started (then it gets SIGINT, as from Ctrl-C).
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from ros2_harness import NETNS_SETUP, child_env, netns_unavailable

ROOT = Path(__file__).resolve().parents[1]
GUIDES = ("docs/guides/recordings.md", "docs/guides/robot.md", "docs/guides/ros2.md", "docs/guides/openpi.md",
          "docs/dataset.md")
COMMANDS = ("bash", "python")  # the fences that hold commands; yaml, json, text, xml are files or output
MARK = "guide-test:"
DIRECTIVE = re.compile(r'^(skip|setup|drop|append|background|until-stopped)(?:\s+"([^"]+)")?\s*(?::\s*(.*))?$')
TIMEOUT_S = 240  # one guide, every block


@dataclass
class Block:
    guide: str
    line: int
    lang: str
    code: str
    directives: list[tuple[str, str, str]] = field(default_factory=list)  # (name, prefix, text)

    def get(self, name: str) -> list[tuple[str, str]]:
        return [(prefix, text) for n, prefix, text in self.directives if n == name]

    @property
    def where(self) -> str:
        return f"{self.guide}:{self.line}"


def blocks(guide: str) -> list[Block]:
    """The command blocks of ``guide``, each with the directives of the comment right above it."""
    lines = (ROOT / guide).read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        above = lines[i - 1].strip() if i else ""
        directives = []
        if above.startswith("<!--") and MARK in above:
            body = above.removeprefix("<!--").removesuffix("-->").strip().removeprefix(MARK)
            for part in body.split(" ; "):
                match = DIRECTIVE.match(part.strip())
                assert match, f"{guide}:{i}: bad directive {part.strip()!r} (see tests/test_guides.py)"
                directives.append((match[1], match[2] or "", (match[3] or "").strip()))
        if fence[1] in COMMANDS:
            found.append(Block(guide, i + 1, fence[1], "\n".join(lines[i + 1:end]), directives))
        else:
            assert not directives, f"{guide}:{i + 1}: a {fence[1] or 'plain'} block is not run; drop its directives"
        i = end + 1
    return found


def runnable(block: Block) -> str:
    """The block's code as the test runs it: dropped lines left out, short settings appended."""
    out = []
    for line in block.code.replace("planner-host", "127.0.0.1").splitlines():
        if any(line.lstrip().startswith(prefix) for prefix, _ in block.get("drop")):
            continue
        for prefix, args in block.get("append"):
            if line.lstrip().startswith(prefix):
                code, hash_, comment = line.partition("  #")
                amp = " &" if code.rstrip().endswith("&") else ""
                line = f"{code.rstrip().removesuffix('&').rstrip()} {args}{amp}" + (f"  {hash_}{comment}" if hash_ else "")
        out.append(line)
    return "\n".join(out)


def last_command(lines: list[str]) -> int:
    """The index of the last line that runs something (neither blank nor a comment)."""
    return max(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#"))


# ------------------------------------------------------------------------------------------ setups

MS = 1_000_000  # ns


def mobile_base_bag(work: Path) -> tuple[str, str]:
    """recordings.md's quick start: a bag of the guide's mobile base (odometry at 50 Hz, Twist
    commands, goal poses; 3 goals of 60 steps), its mapping, and the bridge's config for it."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    if (work / "rosbag2_2026_11_27").exists():  # an earlier block's
        return "", ""
    store = get_typestore(Stores.ROS2_KILTED)
    T = store.types
    vec3 = lambda v: T["geometry_msgs/msg/Vector3"](x=float(v[0]), y=float(v[1]), z=0.0)  # noqa: E731
    pose = lambda v: T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](x=float(v[0]), y=float(v[1]), z=0.0),  # noqa: E731
                                                 orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))
    header = lambda ms: T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=1 + ms // 1000, nanosec=(ms % 1000) * MS), frame_id="map")  # noqa: E731
    rng = np.random.default_rng(0)
    p = np.zeros(2)
    with Writer(work / "rosbag2_2026_11_27", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c = {name: w.add_connection(topic, kind, typestore=store) for name, topic, kind in (
            ("odom", "/base/odom", "nav_msgs/msg/Odometry"), ("cmd", "/base/cmd_vel", "geometry_msgs/msg/Twist"),
            ("goal", "/base/goal_pose", "geometry_msgs/msg/PoseStamped"))}
        for i in range(180):
            ms = 20 * i
            if i % 60 == 0:
                goal = rng.uniform(-2, 2, 2)
                w.write(c["goal"], 10**9 + ms * MS, store.serialize_cdr(
                    T["geometry_msgs/msg/PoseStamped"](header=header(ms), pose=pose(goal)), "geometry_msgs/msg/PoseStamped"))
            v = np.clip(goal - p, -1, 1)
            odom = T["nav_msgs/msg/Odometry"](
                header=header(ms), child_frame_id="base_link",
                pose=T["geometry_msgs/msg/PoseWithCovariance"](pose=pose(p), covariance=np.zeros(36)),
                twist=T["geometry_msgs/msg/TwistWithCovariance"](
                    twist=T["geometry_msgs/msg/Twist"](linear=vec3(v), angular=vec3([0, 0])), covariance=np.zeros(36)))
            w.write(c["odom"], 10**9 + ms * MS + 1, store.serialize_cdr(odom, "nav_msgs/msg/Odometry"))
            w.write(c["cmd"], 10**9 + (ms + 10) * MS, store.serialize_cdr(
                T["geometry_msgs/msg/Twist"](linear=vec3(v), angular=vec3([0, 0])), "geometry_msgs/msg/Twist"))
            p = p + 0.02 * v
    shutil.copy(ROOT / "docs" / "guides" / "mappings" / "mobile_base.yaml", work)
    (work / "bridge.yaml").write_text(
        "observation: {type: odometry, fields: [position, linear], indices: [0, 1, 3, 4]}\n"
        "goal: {type: pose, indices: [0, 1]}\n"
        "topics: {observation: /base/odom, goal: /base/goal_pose, action: /base/cmd_vel}\n")
    return "", ""


def arm_recording(work: Path) -> tuple[str, str]:
    """recordings.md's robot without a simulator: an arm's recording (a 3-d tool position the goal,
    joint velocity commands) under an env id no env has, and the guide's mapping of it."""
    rng = np.random.default_rng(0)
    obs, actions, ends = [], [], []
    for _ in range(24):
        q = rng.uniform(-1, 1, 3)
        for t in range(50):
            if t % 25 == 0:
                target = rng.uniform(-1, 1, 3)
            a = np.clip(2 * (target - q) + rng.normal(0, 0.2, 3), -1, 1)
            obs.append(q.copy()), actions.append(a), ends.append(t == 49)
            q = q + 0.04 * a
    obs = np.asarray(obs, np.float32)
    from l3p.core.dataset import save_dataset

    (work / "data").mkdir(exist_ok=True)
    save_dataset(work / "data" / "arm.npz", observations=obs, actions=np.asarray(actions, np.float32),
                 terminals=np.asarray(ends), achieved_goals=obs, env_id="lab/arm-3", made_by={"robot": "arm-3"})
    return "", ""


def models(work: Path, names: tuple[str, ...] = ("FetchPush-v4",)) -> None:
    """``models/``: copies (a server follows no link) of the shipped bundles the block names (one
    loads faster than all)."""
    for name in names:
        if not (work / "models" / name).exists():  # an earlier block's
            shutil.copytree(ROOT / "models" / name, work / "models" / name)


def fetch_push_robot(work: Path) -> tuple[str, str]:
    """robot.md: a server of FetchPush-v4 on the guide's port, and a robot: the env, 5 steps."""
    models(work)
    serve = ("l3p serve --bundle models/FetchPush-v4 --port 50051 > serve.log 2>&1 &\n"
             "for _ in $(seq 300); do grep -q L3P_SERVER_READY serve.log && break; sleep 0.2; done\n")
    robot = ("from l3p.sim.envs import make_env\n\n"
             "class Robot:\n"
             "    def __init__(self):\n"
             "        self.env, self.steps = make_env('FetchPush-v4'), 0\n"
             "        self.obs, _ = self.env.reset(seed=1)\n"
             "    def done(self): return self.steps == 5\n"
             "    def observation(self): return self.obs['observation']\n"
             "    def apply(self, action):\n"
             "        self.obs, *_ = self.env.step(action)\n"
             "        self.steps += 1\n\n"
             "robot = Robot()\ngoal = robot.obs['desired_goal']\n")
    return serve, robot


def openpi_robot(work: Path) -> tuple[str, str]:
    """openpi.md: the robot's env (FetchPush-v4) and a loop that ends after 5 steps."""
    models(work)
    robot = ("from l3p.sim.envs import make_env\n\n"
             "class Steps:  # the robot's own end of episode: here, 5 steps\n"
             "    n = 0\n"
             "    def __bool__(self):\n"
             "        self.n += 1\n"
             "        return self.n > 5\n\n"
             "env, done = make_env('FetchPush-v4'), Steps()\n")
    return "", robot


def arrays(work: Path) -> tuple[str, str]:
    """dataset.md's writer: the arrays a robot recorded (2 episodes of 10 steps)."""
    return "", ("import numpy as np\n"
                "obs = actions = achieved = goals = np.zeros((20, 3), np.float32)\n"
                "ends = np.tile(np.arange(10) == 9, 2)\n")


SETUPS: dict[str, Callable[[Path], tuple[str, str]]] = {
    "mobile-base-bag": mobile_base_bag, "arm-recording": arm_recording, "fetch-push-robot": fetch_push_robot,
    "openpi-robot": openpi_robot, "arrays": arrays, "models": lambda work: models(work) or ("", ""),
}


# ------------------------------------------------------------------------------------------ tests

def test_every_command_block_runs_or_says_why_not():
    """Each directive is known and not stale: a skip gives its reason, a setup exists, a drop or an
    append names lines the block has."""
    total = 0
    for guide in GUIDES:
        for block in blocks(guide):
            total += 1
            for prefix, reason in block.get("skip") + block.get("drop"):
                assert reason, f"{block.where}: say why it is not run"
            for _, name in block.get("setup"):
                assert name in SETUPS, f"{block.where}: no setup {name!r} in tests/test_guides.py"
            for prefix, _ in block.get("drop") + block.get("append"):
                assert any(line.lstrip().startswith(prefix) for line in block.code.splitlines()), \
                    f"{block.where}: no line starts with {prefix!r}"
            for name in ("until-stopped", "background"):
                for _, number in block.get(name):
                    assert number.isdigit(), f"{block.where}: {name}: SECONDS or PORT, got {number!r}"
    assert total >= 12


def test_until_stopped_times_the_last_command_not_a_comment_below_it():
    assert last_command(["l3p serve &", "l3p ros2 record --out x.npz  # runs until Ctrl-C", "# x.npz, x_0001.npz", ""]) == 1


def guide_script(guide: str, work: Path) -> str:
    """One bash script: each block in turn (a file of its own), its background jobs stopped after
    it (but for ``background`` blocks), failing on the first block that fails, naming it."""
    steps = [f"{NETNS_SETUP}", f"cd {shlex.quote(str(work))}", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for k, block in enumerate(blocks(guide)):
        if block.get("skip"):
            continue
        bash_prelude, python_prelude = "", ""
        for _, name in block.get("setup"):
            more = SETUPS[name](work)
            bash_prelude, python_prelude = bash_prelude + more[0], python_prelude + more[1]
        code = runnable(block)
        stop_jobs = "trap 'kill $(jobs -p) 2>/dev/null || true; wait || true' EXIT\n"
        if block.lang == "python":
            (work / f"block{k}.py").write_text(python_prelude + code + "\n")
            code = f"python block{k}.py"
        if block.get("until-stopped"):  # the last command must outlive its seconds: timeout's 124
            seconds = block.get("until-stopped")[0][1]
            lines = code.splitlines()
            k_last = last_command(lines)  # not a comment after it: timeout would run nothing
            code = "\n".join([*lines[:k_last], "set +e", f"timeout -s INT -k 10 {seconds} {lines[k_last]}", "rc=$?",  # as Ctrl-C; its comment ends the line
                              f"[ $rc = 124 ] || {{ echo 'it stopped (exit '$rc') before {seconds} s'; exit 1; }}"])
        (work / f"block{k}.sh").write_text(("" if block.get("background") else stop_jobs) + bash_prelude + code + "\n")
        run = f"bash -e block{k}.sh"
        if block.get("background"):
            port = block.get("background")[0][1]
            steps.append(f"echo '=== {block.where} (in the background)'; {run} &")
            steps.append(f"for _ in $(seq 600); do (echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
                         f"kill -0 $! 2>/dev/null || {{ echo 'FAILED {block.where}: it ended'; exit 1; }}; sleep 0.2; done")
        else:
            steps.append(f"echo '=== {block.where}'; {run} || {{ echo 'FAILED {block.where}'; exit 1; }}")
    return "\n".join(steps) + "\necho GUIDE-DONE\n"


@pytest.mark.parametrize("guide", [g for g in GUIDES if any(not b.get("skip") for b in blocks(g))])
def test_the_guides_command_blocks_run_as_written(guide, tmp_path):
    if why := netns_unavailable():
        pytest.skip(why)
    script = guide_script(guide, tmp_path)
    env = {**child_env(), "PATH": f"{Path(sys.executable).parent}:{child_env()['PATH']}"}
    log = tmp_path / "guide.log"  # a file, not a pipe: a server a block left running holds its output open
    with log.open("w") as output:
        proc = subprocess.Popen(["unshare", "-n", "bash", "-c", script], stdout=output, stderr=subprocess.STDOUT,
                                text=True, env=env, cwd=tmp_path, start_new_session=True)
    try:
        proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    finally:  # whatever a block left running in the group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    out = log.read_text() + ("" if proc.returncode is not None else f"past {TIMEOUT_S} s: killed\n")
    assert proc.returncode == 0 and out.rstrip().endswith("GUIDE-DONE"), out[-6000:]
