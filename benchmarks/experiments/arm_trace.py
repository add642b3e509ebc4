"""Where the served planner's sub-goals lead an arm (OGBench's manipulation envs, validation episodes,
in-process, OGBench's tasks in turn): per episode the sub-goals pursued in turn, how many objects each
asked to change from where they were at its pick, whether the arm got them there before the next pick,
and at the end which objects were wrong. A sub-goal's "objects" are the parts of the goal the env
declares (a cube's position, a button's state, the drawer, the window), each within its tolerance.

    python benchmarks/experiments/arm_trace.py BUNDLE EPISODES [--max-steps T] [KEY=VALUE ...]
"""
from __future__ import annotations

import collections

import numpy as np

from episodes import episode_parser, load, planner_episode
from l3p.core import GOAL
from l3p.core.overrides import parse_overrides


def wrong(manipulation, achieved: np.ndarray, target: np.ndarray) -> list[str]:
    """The parts of ``target`` that ``achieved`` is not within tolerance of, as kind+number."""
    return [f"{part.kind}{part.number}" for part, where in manipulation.goal_slices
            if np.linalg.norm(achieved[where] - target[where]) > part.tolerance]


def picks(episode) -> list[tuple[int, int]]:
    """(step, sub-goal index) at each change of the pursued sub-goal."""
    out, last = [], None
    for t, step in enumerate(episode.steps):
        if step.plan.subgoal_index != last:
            out.append((t, step.plan.subgoal_index))
            last = step.plan.subgoal_index
    return out


a = episode_parser(overrides=True).parse_args()
model = load(a.bundle)
config = model.config(**parse_overrides(a.overrides, "KEY=VALUE"))
env = model.env(max_steps=None)
manipulation = env.unwrapped.manipulation
asked, reached, successes = collections.Counter(), collections.Counter(), 0
for seed, task in model.episodes(env, a.episodes):
    ep = planner_episode(model, env, seed, task, config, max_steps=a.max_steps)
    successes += ep.success
    chain = picks(ep) + [(len(ep.steps), None)]
    lines = []
    for (t, index), (t_next, _) in zip(chain, chain[1:]):
        target = ep.steps[t].goal
        changes = wrong(manipulation, ep.steps[t].achieved, target)
        got = any(not wrong(manipulation, s.next_achieved, target) for s in ep.steps[t:t_next])
        kind = "goal" if index == GOAL else f"L{index}"
        asked[len(changes)] += 1
        reached[len(changes)] += got
        lines.append(f"{kind}@{t}:{'+'.join(changes) or '-'}{'' if got else '(missed)'}")
    left = wrong(manipulation, ep.steps[-1].next_achieved, ep.goal)
    print(f"seed {seed} task {task}: {'success' if ep.success else 'failure'} at {len(ep.steps)} steps, "
          f"{len(chain) - 1} sub-goals; wrong at the end: {'+'.join(left) or '-'}")
    print("  " + " ".join(lines))
print(f"{successes}/{a.episodes} reached")
for n in sorted(asked):
    print(f"sub-goals asking {n} object(s) to change: {asked[n]}, reached {reached[n]} ({100 * reached[n] / asked[n]:.0f} %)")
