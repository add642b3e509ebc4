"""Where the served ant falls: the planner in-process (the server's planner code and the bundle's ONNX
networks) on validation episodes (seeds 1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps),
at the bundle's d_max or another; wins, falls, and how near a wall the ant was when it began to tip
(its up axis below 0.8; a diagnostic with the maze's walls), beside all its steps. With --expert, the
expert that recorded the data drives the ant instead of the learned actor, given the unit direction
to each subgoal as the dataset generator gives it the oracle's. --action-scale serves a gentler gait
(the planner's `action_scale`); --hold-below U sends a zero action while the up axis is below U
(until it is back above --hold-until), a reflex tried against tipping.

    python benchmarks/experiments/falls.py BUNDLE EPISODES [--seed S] [--d-max D] [--action-scale A]
        [--hold-below U [--hold-until U2]] [--expert POLICY.npz] [--max-steps T]
"""
import numpy as np

from l3p.core.mlp_policy import load_mlp_policy
from l3p.core.seeds import VALIDATION
from l3p.sim.datasets import follow
from l3p.sim.envs import goal_adapter
from episodes import episode_parser, load, planner_episode
from walls import distance_to_walls

ap = episode_parser()
ap.add_argument("--seed", type=int, default=VALIDATION, help="episode i's seed is SEED + i")
ap.add_argument("--d-max", type=float, help="the planner's d_max (default: the bundle's)")
ap.add_argument("--action-scale", type=float, help="the planner's action_scale (default: the bundle's)")
ap.add_argument("--hold-below", type=float, help="a zero action while the up axis is below this")
ap.add_argument("--hold-until", type=float, help="... until it is above this (default: --hold-below)")
ap.add_argument("--expert", help="the expert's policy file: it drives the ant toward each subgoal")
a = ap.parse_args()
model = load(a.bundle)
config = model.config(d_max=a.d_max, action_scale=a.action_scale)
hold_below = -2.0 if a.hold_below is None else a.hold_below
hold_until = hold_below if a.hold_until is None else a.hold_until
expert = load_mlp_policy(a.expert) if a.expert else None
env = model.env(a.max_steps)
up = goal_adapter(env).uprightness
held = 0


def act(obs, plan):
    """The action sent: the expert's toward the subgoal (as the served scale) or the planner's, or none while held."""
    global holding, held
    holding = up(obs) < (hold_until if holding else hold_below)
    held += holding
    if holding:
        return np.zeros_like(plan.action)
    if expert is None:
        return plan.action
    way = plan.subgoal[:2] - obs[:2]
    way /= max(np.linalg.norm(way), 1e-6)
    return (follow(expert, obs, way) * config.action_scale).astype(np.float32)


wins, fell, tipping, path = 0, 0, [], []
for seed, task in model.episodes(env, a.episodes, a.seed):
    holding = False
    episode = planner_episode(model, env, seed, task, config, act=act, max_steps=a.max_steps, stop_on_fall=True)
    path += [step.achieved for step in episode.steps]
    wins += episode.success
    if episode.fallen:
        fell += 1
        tipped = [step.achieved for step in episode.steps if up(step.obs) < 0.8]
        tipping.append(tipped[0] if tipped else episode.steps[-1].next_achieved)
near = distance_to_walls(np.array(tipping), env) < 1.0 if tipping else np.zeros(0, bool)
hold = f", held below {hold_below} (to {hold_until}) {held} steps" if a.hold_below is not None else ""
print(f"{a.bundle}{' (the expert driving)' if a.expert else ''}, seeds {a.seed} + i, d_max {config.d_max}, "
      f"action_scale {config.action_scale}{hold}: {wins} of {a.episodes}, "
      f"{fell} fell; {int(near.sum())} of the {fell} began to tip within 1 m of a wall, where "
      f"{np.mean(distance_to_walls(np.array(path), env) < 1.0):.0%} of all steps lie")
