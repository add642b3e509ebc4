"""The bridge's ReachGoal action measured: goals reached on held-out pairs, cancel -> hold, preemption.

    python benchmarks/ros2_action.py [--fetch-episodes 10 --maze-episodes 10 --trials 10] [--out FILE.json]

Runs the ``action`` scenario of tests/ros2_action.py (the test suite runs it with one episode each)
inside a network namespace of its own (root needed), never on the machine's interfaces: one planner
server; FetchPush-v4 on held-out seeds 2000000000.. and PointMaze_Large-v3 on far pairs (>= 10 cells,
800 steps) driven by ``l3p ros2 sim --goal-action`` at 50 Hz (its ActionClient sends each goal); the
probe robot's goals cancelled and replaced ``--trials`` times each; the server restarted mid-goal.

Per model: goals REACHED (the result, within the env's success distance), the steps they took and
the feedback messages per goal. Cancel: the actions published from the cancel request to the hold
(one control period: at most 1), and any command after the hold. Preemption: the actions for the
old goal stamped after the new goal's acceptance (0 wanted).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import ros2_harness as h  # noqa: E402


def summarize(r: dict) -> dict:
    out: dict = {"models": {}}
    for ns, model in (("/arm", "FetchPush-v4"), ("/base", "PointMaze_Large-v3")):
        episodes = r["episodes"][ns]
        results = [e["result"] for e in episodes]
        reached = [x for x in results if x["outcome"] == "reached"]
        out["models"][model] = {
            "goals": len(results), "reached": len(reached),
            "outcomes": [x["outcome"] for x in results],
            "steps_p50": float(np.median([x["steps"] for x in reached])) if reached else None,
            "feedback_per_goal_p50": float(np.median([len(e["feedback"]) for e in episodes])),
        }
    a, b = (np.array(r["probe"]["policy"][g]) for g in ("a", "b"))
    cancels = []
    for c in r["probe"]["cancel"]:
        holds = [i for i, x in enumerate(c["after"]) if x["hold"]]
        cancels.append({"actions_to_hold": holds[0] if holds else None,
                        "after_hold": len(c["after"]) - 1 - holds[0] if holds else None,
                        "outcome": c["result"]["outcome"]})
    preempts = []
    for p in r["probe"]["preempt"]:
        after = [np.array(x["data"]) for x in p["commands"] if x["stamp"] > p["accepted_ns"]]
        preempts.append({"old_goal_actions_after": int(sum(np.allclose(x, a, atol=1e-6) for x in after)),
                         "new_goal_actions": int(sum(np.allclose(x, b, atol=1e-6) for x in after)),
                         "old_outcome": p["first"]["outcome"]})
    out["cancel"] = {"trials": len(cancels), "max_actions_to_hold": max(c["actions_to_hold"] for c in cancels),
                     "commands_after_hold": sum(c["after_hold"] for c in cancels), "runs": cancels}
    out["preempt"] = {"trials": len(preempts),
                      "old_goal_actions_after_acceptance": sum(p["old_goal_actions_after"] for p in preempts),
                      "runs": preempts}
    out["restart"] = {"outcome": r["restart"]["episode"]["result"]["outcome"],
                      "steps": r["restart"]["episode"]["result"]["steps"],
                      "commands_while_down": r["restart"]["commands_while_down"],
                      "actions_after_restart": r["restart"]["actions_after_restart"]}
    out["episodes_s"] = r["episodes_s"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fetch-episodes", type=int, default=10)
    parser.add_argument("--maze-episodes", type=int, default=10)
    parser.add_argument("--trials", type=int, default=10, help="cancels and preemptions of the probe's goals")
    parser.add_argument("--out", type=Path, default=None, help="write the summary (JSON)")
    args = parser.parse_args()
    reason = h.netns_unavailable()
    if reason:
        sys.exit(f"benchmarks/ros2_action.py: {reason}")
    params = dict(seed=2_000_000_000, fetch_episodes=args.fetch_episodes, base_episodes=args.maze_episodes,
                  probe=True, trials=args.trials, restart=True, restart_max_steps=1500, timeout_s=3000)
    t0 = time.perf_counter()
    r = h.run_scenario("action", params, timeout_s=3600, script=REPO / "tests" / "ros2_action.py")
    out = {**summarize(r), "wall_s": time.perf_counter() - t0, "params": params}
    for model, m in out["models"].items():
        print(f"{model:20s} goals reached {m['reached']}/{m['goals']}  steps p50 {m['steps_p50']}  "
              f"feedback per goal p50 {m['feedback_per_goal_p50']:g}  outcomes {m['outcomes']}")
    c, p = out["cancel"], out["preempt"]
    print(f"cancel      {c['trials']} trials: at most {c['max_actions_to_hold']} action(s) from the request to the "
          f"hold, {c['commands_after_hold']} command(s) after it")
    print(f"preemption  {p['trials']} trials: {p['old_goal_actions_after_acceptance']} action(s) for the old goal "
          f"after the new one's acceptance")
    print(f"restart     the goal {out['restart']['outcome']} in {out['restart']['steps']} steps "
          f"({out['restart']['commands_while_down']} commands while the server was down, then "
          f"{out['restart']['actions_after_restart']} actions)")
    print(f"wall {out['wall_s']:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
