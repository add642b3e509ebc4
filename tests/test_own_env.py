"""A goal env defined outside the package (tests/goal_envs.py) plugs in: make_env builds and checks
it, its declared adapter is what L3P reads, and it trains, exports, serves and runs through `l3p`."""
from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from goal_envs import REACH, PointReach
from l3p.core.errors import USAGE
from l3p.sim.envs import GoalEnvAdapter, UnknownEnvError, VecGoalEnv, env_spec, goal_adapter, make_env

TESTS = Path(__file__).resolve().parent
ENV = "goal_envs:PointReach"


# --------------------------------------------------------------------------- make_env


def test_a_module_class_is_made_like_a_registered_env():
    env = make_env(ENV)
    spec = env_spec(env)
    assert spec.env_id == ENV and (spec.obs_dim, spec.goal_dim, spec.action_dim) == (2, 2, 2)
    assert spec.max_steps == PointReach.max_episode_steps == 30
    assert spec.adapter == GoalEnvAdapter(success_key="reached", reward_offset=-1.0)
    assert isinstance(env.unwrapped, PointReach)
    env.reset(seed=0)
    steps = 0
    while True:  # the time limit make_env applied ends the episode
        _, _, terminated, truncated, _ = env.step(np.zeros(2, np.float32))
        steps += 1
        if terminated or truncated:
            break
    assert steps == 30 and truncated
    assert env_spec(make_env(ENV, max_episode_steps=12)).max_steps == 12


def test_the_declared_adapter_gives_the_reward_and_success_l3p_needs():
    env = VecGoalEnv(ENV, 2)
    obs = env.reset([3, 4])
    # Env 0's goal is moved onto the point, env 1's stays where reset put it.
    env.envs[0].unwrapped.goal = obs["achieved_goal"][0].astype(np.float64)
    obs, success = env.step(np.zeros((2, 2), np.float32))
    assert np.linalg.norm(obs["achieved_goal"][1] - obs["desired_goal"][1]) > REACH
    np.testing.assert_array_equal(success, [1.0, 0.0])  # info["reached"]
    goals = np.stack([obs["achieved_goal"][0], obs["desired_goal"][1]])
    np.testing.assert_array_equal(env.compute_reward(obs["achieved_goal"], goals), [0.0, -1.0])  # 1/0 - 1
    env.close()


class UndeclaredOneZero(PointReach):
    """The same 1/0 reward without declaring the offset."""

    l3p_reward_offset = 0.0


class StandardReach(gym.Env):
    """The GoalEnv convention (reward -1 / 0, info["is_success"]) needs no declaration."""

    box = spaces.Box(-1.0, 1.0, (2,), np.float64)
    observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    max_episode_steps = 5

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -(np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) > REACH).astype(np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, 2)
        return self._obs(), {}

    def _obs(self):
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": np.zeros(2)}

    def step(self, action):
        obs = self._obs()
        reward = float(self.compute_reward(self.pos, np.zeros(2), None))
        return obs, reward, False, False, {"is_success": reward == 0.0}


class VelocityOnly(StandardReach):
    """Observes only its velocity, so it asks for its position (the achieved goal) in front."""

    l3p_prepend_achieved_goal = True
    observation_space = spaces.Dict({"observation": spaces.Box(-1.0, 1.0, (1,)), "achieved_goal": StandardReach.box,
                                     "desired_goal": StandardReach.box})

    def _obs(self):
        return {**super()._obs(), "observation": np.array([0.25], np.float32)}


class Slowed(StandardReach):
    """Declares the settings its constructor is made with (as the ant maze declares its rate)."""

    l3p_env_kwargs: ClassVar[dict] = {"substeps": 4, "label": "slow"}

    def __init__(self, substeps: int = 1, label: str = "") -> None:
        self.substeps, self.label = substeps, label


class NotGoalConditioned(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (2,))
    action_space = spaces.Discrete(3)
    max_episode_steps = 10


def test_the_default_adapter_is_the_goal_env_convention():
    env = VecGoalEnv("test_own_env:StandardReach", 1)
    assert env.spec.adapter == GoalEnvAdapter(success_key="is_success", reward_offset=0.0)
    obs = env.reset([0])
    np.testing.assert_array_equal(env.compute_reward(obs["achieved_goal"], obs["achieved_goal"]), [0.0])
    _, success = env.step(np.zeros((1, 2), np.float32))
    assert success[0] == float(np.linalg.norm(obs["achieved_goal"][0]) <= REACH)  # info["is_success"]
    env.close()


def test_an_env_that_hides_its_position_gets_it_in_front_of_its_observation():
    env = VecGoalEnv("test_own_env:VelocityOnly", 2)
    assert env.spec.adapter == GoalEnvAdapter("is_success", 0.0, prepend_achieved_goal=True)
    assert env.spec.obs_dim == 3
    obs = env.reset([0, 1])
    np.testing.assert_array_equal(obs["observation"][:, :2], obs["achieved_goal"])
    np.testing.assert_array_equal(obs["observation"][:, 2], [0.25, 0.25])
    env.close()


def test_an_env_is_constructed_with_its_declared_settings():
    env = make_env("test_own_env:Slowed")
    assert (env.unwrapped.substeps, env.unwrapped.label) == (4, "slow")
    assert goal_adapter(env).env_kwargs == (("substeps", 4), ("label", "slow"))
    env.close()


@pytest.mark.parametrize("env_id, message", [
    ("test_own_env:UndeclaredOneZero", r"\[1.0, 0.0\] at the goal .* l3p_reward_offset = -1.0"),
    ("test_own_env:NotGoalConditioned", r"observations are a Box, not a Dict .* actions are a Discrete, not a 1-d Box"
                                        r".* no compute_reward"),
    ("goal_envs:Missing", r"unknown env id .*`Missing` doesn't exist"),
    ("no_such_module:PointReach", r"cannot import 'no_such_module'"),
    ("goal_envs:REACH", r"REACH is not a gymnasium.Env subclass"),
])
def test_what_is_not_a_usable_goal_env_is_one_clear_line(env_id, message):
    with pytest.raises(UnknownEnvError, match=message) as err:
        make_env(env_id)
    assert env_id in str(err.value) and "\n" not in str(err.value)


def test_a_missing_success_key_is_named():
    env = make_env(ENV)
    with pytest.raises(UnknownEnvError, match="'reached'.*l3p_success_key"):
        env_spec(env).adapter.success({"is_success": True})


# --------------------------------------------------------------------------- end to end through `l3p`


# Small enough for ~10 s of training on one core; the policy reaches every eval goal by ~3600 steps.
TRAIN_SET = dict(n_envs=4, warmup_episodes=8, updates_per_cycle=40, batch_size=128, hidden=64, layers=2,
                 ae_hidden=32, n_landmarks=8, gls_sample=200, cluster_batch=40, extra_landmarks=4,
                 planning_start_episodes=40, eval_every_cycles=10, eval_episodes=10, checkpoint_every_cycles=100,
                 buffer_episodes=400, collector="inline", future_step=30, action_l2=0.05)


def l3p(*argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """The `l3p` command as a user runs it: their env module on PYTHONPATH, from their directory."""
    return subprocess.run([sys.executable, "-m", "l3p", *argv], cwd=cwd, env=user_env(), capture_output=True,
                          text=True, timeout=timeout)


def user_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(TESTS), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


@contextmanager
def l3p_serve(bundle: Path, cwd: Path):
    """`l3p serve --port 0` in its own process; yields the port from its READY line."""
    proc = subprocess.Popen([sys.executable, "-m", "l3p", "serve", "--bundle", str(bundle), "--port", "0"],
                            cwd=cwd, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, port = time.monotonic() + 60, None
        while port is None and time.monotonic() < deadline and proc.poll() is None:
            if select.select([proc.stdout], [], [], 1.0)[0]:
                match = re.search(r"L3P_SERVER_READY port=(\d+)", proc.stdout.readline())
                port = int(match.group(1)) if match else None
        assert port is not None, f"l3p serve did not start: {proc.stderr.read() if proc.poll() is not None else ''}"
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_own_env_trains_exports_serves_and_runs(tmp_path):
    sets = [f"--set={k}={json.dumps(v)}" for k, v in TRAIN_SET.items()]
    train = l3p("train", "--env", ENV, "--out", "run", "--steps", "4800", "--seed", "0", "--no-progress", *sets,
                cwd=tmp_path)
    assert train.returncode == 0, train.stderr[-2000:]
    bundle = tmp_path / "run" / "bundle"
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["env_id"] == ENV
    assert manifest["dims"] == {"obs": 2, "goal": 2, "action": 2}
    assert manifest["action_low"] == [-1.0, -1.0] and manifest["action_high"] == [1.0, 1.0]

    with l3p_serve(bundle, tmp_path) as port:
        server = f"127.0.0.1:{port}"
        # `l3p run` builds the env from the same spec, with make_env, and reads its declared flag.
        run = l3p("run", "--server", server, "--env", ENV, "--episodes", "3", "--seed", "2000000000",
                  "--video", "reach.mp4", "--video-size", "64", cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-2000:]
        episodes = re.findall(r"episode +(\d+) +seed (\d+) +(success|failure) +final distance ([\d.]+) +steps (\d+)",
                              run.stdout)
        assert [(int(i), int(s), int(n)) for i, s, _, _, n in episodes] == [
            (0, 2_000_000_000, 30), (1, 2_000_000_001, 30), (2, 2_000_000_002, 30)]
        assert f"{ENV}  planner l3p" in run.stdout
        assert (tmp_path / "reach.mp4").stat().st_size > 0

        # A module:Class that is no goal env: the command's one error line, the usage exit code.
        bad = l3p("run", "--server", server, "--env", "test_own_env:NotGoalConditioned", "--episodes", "1",
                  cwd=tmp_path)
        assert bad.returncode == USAGE and bad.stdout == "" and bad.stderr.count("\n") == 1
        assert bad.stderr.startswith("l3p run: error: ") and "observations are a Box, not a Dict" in bad.stderr

        # `l3p eval` with no --env runs the served model's env: the same module:Class id.
        evaluated = l3p("eval", "--server", server, "--episodes", "10", "--seed", "2000000000",
                        "--modes", "policy,l3p", "--out", "eval.json", "--no-progress", cwd=tmp_path)
        assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["env_id"] == ENV and report["model"]["env_id"] == ENV
    for mode, m in report["modes"].items():
        assert [e["steps"] for e in m["per_episode"]] == [30] * 10, mode
        # info["reached"] at the last step is exactly "within REACH after the last step".
        for e in m["per_episode"]:
            assert e["success"] == (e["final_distance"] <= REACH), (mode, e)
    assert report["modes"]["policy"]["successes"] >= 8  # it learned: 10 of 10 in training's own eval
    assert report["modes"]["l3p"]["successes"] >= 8
