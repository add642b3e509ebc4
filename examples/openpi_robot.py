"""An openpi robot loop, unmodified, driven by the planner: openpi-client's ``WebsocketClientPolicy``
and ``infer``, with gymnasium's FetchPush standing in for the robot. Only the URL (it names the model)
and the observation dict's keys are the planner's: ``observation/state`` and ``goal`` (a vector, not a
``prompt``); one action per call (``action_horizon`` 1: the planner is closed loop).

    l3p serve --bundle models/FetchPush-v4 --openpi-port 8000 &
    python examples/openpi_robot.py --url ws://127.0.0.1:8000/models/FetchPush-v4 --episodes 3

Needs openpi-client (``pip install openpi-client``) and, for the stand-in robot, ``pip install -e '.[sim]'``.
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import gymnasium_robotics
from openpi_client.websocket_client_policy import WebsocketClientPolicy

HELD_OUT = 2_000_000_000  # episode seeds no training run drew


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="ws://127.0.0.1:8000/models/FetchPush-v4")
    parser.add_argument("--episodes", type=int, default=3)
    args = parser.parse_args()

    gym.register_envs(gymnasium_robotics)
    env = gym.make("FetchPush-v4")  # stands in for your robot
    policy = WebsocketClientPolicy(args.url)  # openpi's own: WebsocketClientPolicy(host, port) works too
    meta = policy.get_server_metadata()
    print(f"{meta['model']}: observation/state {meta['obs_dim']} values, goal {meta['goal_dim']}, "
          f"action_horizon {meta['action_horizon']}")
    for seed in range(HELD_OUT, HELD_OUT + args.episodes):
        obs, _ = env.reset(seed=seed)
        policy.reset()  # openpi-client sends nothing here: the new goal below starts the new episode
        for _ in range(50):
            result = policy.infer({"observation/state": obs["observation"], "goal": obs["desired_goal"]})
            obs, _, _, _, info = env.step(result["actions"][0])  # a chunk of one action
        print(f"seed {seed}: episode {result['episode']}, success {bool(info['is_success'])}, "
              f"{result['step'] + 1} steps")
    env.close()


if __name__ == "__main__":
    main()
