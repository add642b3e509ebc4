"""Drive a robot through a planner server: the README's loop, with gymnasium's FetchPush standing in
for the robot (its observation, its goal, and a way to apply an action).

    l3p serve --bundle models/FetchPush-v4 --port 50051 &
    python examples/drive_robot.py --server 127.0.0.1:50051 --episodes 5

The robot side needs only the base install (grpcio, protobuf, numpy); the stand-in robot needs
gymnasium-robotics (``pip install -e '.[sim]'``).
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import gymnasium_robotics

from l3p.clients.client import PlannerClient
from l3p.core.names import GOAL

HELD_OUT = 2_000_000_000  # episode seeds no training run or validation drew (l3p.core.seeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="127.0.0.1:50051")
    parser.add_argument("--episodes", type=int, default=5)
    args = parser.parse_args()

    gym.register_envs(gymnasium_robotics)
    env = gym.make("FetchPush-v4")  # stands in for your robot: observation, goal, apply
    with PlannerClient(args.server, model="FetchPush-v4", timeout_s=2.0) as client:
        info = client.model_info()
        print(f"{info.env_id}: obs {info.obs_dim}, goal {info.goal_dim}, {info.n_landmarks} landmarks")
        for seed in range(HELD_OUT, HELD_OUT + args.episodes):
            obs, _ = env.reset(seed=seed)
            with client.stream_episode(obs["desired_goal"], mode="l3p", seed=seed) as ep:
                for _ in range(50):
                    step = ep.act(obs["observation"])  # one observation in, one action out
                    obs, _, _, _, env_info = env.step(step.action)
            # The subgoal the planner headed for last: a landmark of the graph, or the goal itself
            # once it is near enough to go straight for it (subgoal_index GOAL, -1).
            heading = "the goal itself" if step.subgoal_index == GOAL else f"landmark {step.subgoal_index}"
            print(f"seed {seed}: success {bool(env_info['is_success'])}, last heading for {heading}")
    env.close()


if __name__ == "__main__":
    main()
