"""Your own goal env, trained, exported, served and driven from Python.

    python examples/point_reach.py --out runs/point-reach          # ~4,800 env steps: a minute or two

``PointReach`` below is a plain gymnasium goal env (no l3p import): a point in the square [-1, 1]^2
that moves at most 0.1 a step and reaches its goal within 0.1. L3P names it by its class,
``point_reach:PointReach`` (this folder is on ``sys.path`` when the script runs), and reads two
class attributes: its success flag is ``info["reached"]``, and its 1 / 0 reward becomes the
-1 / 0 that L3P's distance critic needs. Training uses the Python API: a `TrainConfig` (the
defaults, or an env's preset, with ``replace``), a `Trainer`, `export_bundle`. Serving it runs
``l3p serve`` as a subprocess (`LocalServer`); the episodes go through it with the client library.
Needs ``pip install -e '.[train,serve]'``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium import spaces

SPEED, REACH = 0.1, 0.1


class PointReach(gym.Env):
    max_episode_steps = 30  # the time limit l3p applies
    l3p_success_key = "reached"  # the success flag is info["reached"]
    l3p_reward_offset = -1.0  # reward 1 at the goal, 0 elsewhere -> 0 / -1

    def __init__(self, render_mode: str | None = None) -> None:
        box = spaces.Box(-1.0, 1.0, (2,), np.float64)
        self.observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.pos, self.goal = np.zeros(2), np.zeros(2)

    def compute_reward(self, achieved_goal, desired_goal, info):  # vectorized over a leading axis
        return (np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) <= REACH).astype(np.float64)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos, self.goal = self.np_random.uniform(-1.0, 1.0, (2, 2))
        return self._obs(), {"reached": bool(self.compute_reward(self.pos, self.goal, None))}

    def step(self, action):
        self.pos = np.clip(self.pos + SPEED * np.clip(action, -1.0, 1.0), -1.0, 1.0)
        reward = float(self.compute_reward(self.pos, self.goal, None))
        return self._obs(), reward, False, False, {"reached": reward == 1.0}


def train(out: Path, steps: int) -> Path:
    """A short run of the default config on this env; the bundle's directory."""
    from l3p.training.presets import preset
    from l3p.training.export import export_bundle
    from l3p.training.trainer import Trainer

    cfg = preset("point_reach:PointReach").replace(  # no preset for this env: the defaults
        total_env_steps=steps, n_envs=4, warmup_episodes=8, action_l2=0.05, collector="inline",
        planning_start_episodes=40, eval_every_cycles=20, checkpoint_every_cycles=20)
    trainer = Trainer(cfg, out)
    trainer.train(show_progress=False)
    last = trainer.progress.history[-1]  # the last in-training evaluation (progress.csv's last row)
    print(f"trained {trainer.progress_text()}: success {last['success_policy']:.2f} with the policy alone, "
          f"{last.get('success_l3p', float('nan')):.2f} through the planner")
    return export_bundle(trainer.agent, out / "bundle", trainer.provenance(), force=True)


def drive(bundle: Path, episodes: int) -> int:
    """Serve the bundle and run ``episodes`` through it; the successes."""
    from l3p.clients.client import PlannerClient
    from l3p.serving.local_server import LocalServer

    env, successes = PointReach(), 0
    with LocalServer(bundle) as server, PlannerClient(server.target) as client:
        for seed in range(2_000_000_000, 2_000_000_000 + episodes):  # held-out seeds
            obs, info = env.reset(seed=seed)
            with client.episode(obs["desired_goal"], mode="l3p", seed=seed) as ep:
                for _ in range(PointReach.max_episode_steps):
                    obs, _, _, _, info = env.step(ep.act(obs["observation"]).action)
            successes += info["reached"]
    print(f"{successes}/{episodes} episodes reached their goal through the server")
    return successes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/point-reach"))
    parser.add_argument("--steps", type=int, default=4800, help="env steps to train")
    parser.add_argument("--episodes", type=int, default=20)
    args = parser.parse_args()
    drive(train(args.out, args.steps), args.episodes)


if __name__ == "__main__":
    main()
