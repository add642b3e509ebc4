"""Are a bundle's landmarks subgoals its policy can chain? Measured through a real planner server.

    python benchmarks/landmark_reach.py --bundle models/FetchPush-v4 --episodes 100 --out reach.json

1. Landmarks as goals: from --starts held-out starts, the served policy (mode ``policy``) is given
   each landmark as its episode goal: the per-landmark reach rate (the env's own success test),
   split by how far the landmark lies from the goals the env draws.
2. Calibration: D(start, goal) against the steps the policy took to first reach it, for landmark
   goals and for the env's own goals (a ratio below 1: D promises fewer steps than it takes).
3. Start-state routes: how often the best landmark route D(s, l) + d_cg(l) (edges cut at the served
   d_max) beats the direct D(s, g), and whether that landmark is one the state has already achieved.
4. Planned episodes (--modes, the same held-out episodes for each): success, and per landmark
   pursuit its length and whether the landmark had been achieved when it was picked.

Reference rows are measured in the same run: the env's own goals for (1)-(2), ``policy`` for (4).
For envs whose goal is ``env.unwrapped.goal`` (gymnasium-robotics' Fetch envs, the box scenes).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from l3p.clients.client import PlannerClient
from l3p.clients.runner import open_env, run_episode
from l3p.core import distances_to_goal
from l3p.core.seeds import HELD_OUT
from l3p.serving.bundle import load_bundle
from l3p.serving.local_server import LocalServer
from l3p.sim.envs import goal_adapter
from l3p.sim.render import close_env

LANDMARK_SEED_OFFSET = 100_000  # landmark-goal starts: held-out seeds apart from the planned episodes'


def achieved(env, achieved_goal: np.ndarray, goal: np.ndarray) -> bool:
    """The env's own success test (reward + declared offset == 0)."""
    reward = env.unwrapped.compute_reward(achieved_goal[None], goal[None], None)
    return float(np.asarray(reward).reshape(-1)[0]) + goal_adapter(env).reward_offset == 0.0


def d_of(bundle, obs: np.ndarray, goals: np.ndarray) -> np.ndarray:
    goals = np.atleast_2d(goals).astype(np.float32)
    obs = np.repeat(obs[None].astype(np.float32), len(goals), axis=0)
    return np.asarray(bundle.distance_fn(obs, goals)[0], np.float64).reshape(-1)


def reach(client: PlannerClient, env, bundle, seed: int, goal: np.ndarray | None) -> dict:
    """The policy toward ``goal`` (None: the env's own) from the start of ``seed``."""
    obs, _ = env.reset(seed=seed)
    if goal is not None:  # the env's goal replaced before the first observation is read
        env.unwrapped.goal = np.asarray(goal, np.float64).copy()
        obs = env.unwrapped._get_obs()
    goal = obs["desired_goal"].copy()
    d0 = float(d_of(bundle, obs["observation"], goal)[0])
    already = achieved(env, obs["achieved_goal"], goal)
    first = None
    with client.episode(goal, mode="policy", seed=seed) as ep:
        for t in range(env.spec.max_episode_steps):
            obs, *_ = env.step(ep.act(obs["observation"]).action)
            if first is None and achieved(env, obs["achieved_goal"], goal):
                first = t + 1
    return {"d0": d0, "first": first, "already": already}


def calibration(rows: list[dict]) -> dict:
    moved = [r for r in rows if not r["already"]]
    hit = [r for r in moved if r["first"] is not None]
    ratio = [r["d0"] / r["first"] for r in hit]
    return {"runs": len(moved), "reached": len(hit) / max(len(moved), 1),
            "median_steps": float(np.median([r["first"] for r in hit])) if hit else None,
            "median_d0": float(np.median([r["d0"] for r in hit])) if hit else None,
            "median_d_over_steps": float(np.median(ratio)) if ratio else None}


def start_routes(env, bundle, episodes: int) -> dict:
    cfg = bundle.planner_defaults
    lm = np.asarray(bundle.landmarks, np.float32)
    beats, already, via, direct = [], [], [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=HELD_OUT + i)
        if achieved(env, obs["achieved_goal"], obs["desired_goal"]):
            continue
        d_sg = float(d_of(bundle, obs["observation"], obs["desired_goal"])[0])
        d_sl = d_of(bundle, obs["observation"], lm)
        d_cg = distances_to_goal(lm, obs["desired_goal"].astype(np.float32), bundle.value_fn, cfg)[:-1]
        total = np.where(d_sl <= cfg.d_max, d_sl + d_cg, np.inf)
        k = int(np.argmin(total))
        beats.append(bool(total[k] < d_sg))
        already.append(achieved(env, obs["achieved_goal"], lm[k]))
        via.append(float(total[k]))
        direct.append(d_sg)
    return {"starts": len(beats), "landmark_route_shorter": float(np.mean(beats)),
            "best_landmark_already_achieved": float(np.mean(already)),
            "median_route_via_landmark": float(np.median(via)), "median_direct": float(np.median(direct))}


def pursuits(env, landmarks: np.ndarray, episode) -> list[dict]:
    """Each run of steps pursuing one landmark: its length, whether it was achieved when picked
    and whether it was reached during the run."""
    out, idx, traj, t = [], episode.subgoal_indices, episode.trajectory, 0
    while t < len(idx):
        k, t0 = idx[t], t
        while t < len(idx) and idx[t] == k:
            t += 1
        if k >= 0:
            out.append({"steps": t - t0, "achieved_at_pick": achieved(env, traj[t0], landmarks[k]),
                        "reached": any(achieved(env, a, landmarks[k]) for a in traj[t0 + 1:t + 1])})
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, required=True)
    ap.add_argument("--server", default=None, help="a server serving --bundle (default: start one)")
    ap.add_argument("--starts", type=int, default=3, help="starts per landmark as a goal")
    ap.add_argument("--episodes", type=int, default=100, help="held-out episodes for (3) and (4)")
    ap.add_argument("--modes", default="policy,l3p@local_horizon=0,l3p@local_horizon=0@prune_failed=true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    bundle = load_bundle(args.bundle)
    lm = np.asarray(bundle.landmarks, np.float32)
    server = None if args.server else LocalServer(args.bundle).start()
    target = args.server or f"127.0.0.1:{server.wait_ready(60)}"
    env = open_env(bundle.env_id)
    try:
        with PlannerClient(target) as client:
            own = [reach(client, env, bundle, HELD_OUT + i, None) for i in range(args.episodes)]
            per = [[reach(client, env, bundle, HELD_OUT + LANDMARK_SEED_OFFSET + j, lm[k]) for j in range(args.starts)]
                   for k in range(len(lm))]
            rate = np.array([np.mean([r["first"] is not None for r in rows]) for rows in per])
            env_goals = np.array([env.reset(seed=HELD_OUT + i)[0]["desired_goal"] for i in range(200)])
            off = np.array([np.min(np.linalg.norm(env_goals - x, axis=1)) for x in lm])
            routes = start_routes(env, bundle, args.episodes)
            modes = {}
            for mode in args.modes.split(","):
                eps = [run_episode(client, env, index=i, seed=HELD_OUT + i, mode=mode, record=True)
                       for i in range(args.episodes)]
                runs = [p for e in eps for p in pursuits(env, lm, e)]
                modes[mode] = {"success": sum(e.success for e in eps) / len(eps),
                               "pursuits_per_episode": len(runs) / len(eps),
                               "mean_pursuit_steps": float(np.mean([p["steps"] for p in runs])) if runs else None,
                               "achieved_at_pick": float(np.mean([p["achieved_at_pick"] for p in runs])) if runs else None,
                               "reached": float(np.mean([p["reached"] for p in runs])) if runs else None}
    finally:
        close_env(env)
        if server is not None:
            server.stop()

    near = off < np.median(off)
    result = {"bundle": str(args.bundle), "env_id": bundle.env_id, "landmarks": len(lm), "starts": args.starts,
              "episodes": args.episodes, "per_landmark_reach": rate.round(3).tolist(),
              "landmark_reach": {"all": float(rate.mean()), "near_env_goals": float(rate[near].mean()),
                                 "far_from_env_goals": float(rate[~near].mean()),
                                 "never_reached": int((rate == 0).sum())},
              "calibration": {"landmark_goals": calibration([r for rows in per for r in rows]),
                              "env_goals": calibration(own)},
              "start_routes": routes, "modes": modes}
    print(f"\n{bundle.env_id}: {len(lm)} landmarks, {args.episodes} held-out episodes, served d_max "
          f"{bundle.planner_defaults.d_max:g}")
    lr = result["landmark_reach"]
    print(f"landmarks as the policy's goal ({args.starts} starts each): reach {lr['all']:.2f}; the half nearest the "
          f"env's goals {lr['near_env_goals']:.2f}, the far half {lr['far_from_env_goals']:.2f}; never reached "
          f"{lr['never_reached']}")
    print(f"{'calibration':<24}{'runs':>6}{'reached':>9}{'steps':>7}{'D(s0)':>7}{'D/steps':>9}")
    for name, c in result["calibration"].items():
        fmt = (lambda v: f"{v:.1f}" if v is not None else "-")
        ratio = f"{c['median_d_over_steps']:.2f}" if c["median_d_over_steps"] is not None else "-"
        print(f"{name:<24}{c['runs']:>6}{c['reached']:>9.2f}{fmt(c['median_steps']):>7}{fmt(c['median_d0']):>7}"
              f"{ratio:>9}")
    print(f"start states: best landmark route shorter than direct on {routes['landmark_route_shorter']:.2f} of "
          f"{routes['starts']} (median {routes['median_route_via_landmark']:.1f} vs {routes['median_direct']:.1f} "
          f"steps); that landmark already achieved on {routes['best_landmark_already_achieved']:.2f}")
    print(f"{'mode':<42}{'success':>8}{'pursuits/ep':>12}{'steps':>7}{'achieved@pick':>14}{'reached':>9}")
    for mode, m in modes.items():
        cells = [f"{m[k]:.2f}" if m[k] is not None else "-" for k in ("mean_pursuit_steps", "achieved_at_pick", "reached")]
        print(f"{mode:<42}{m['success']:>8.2f}{m['pursuits_per_episode']:>12.1f}{cells[0]:>7}{cells[1]:>14}{cells[2]:>9}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
