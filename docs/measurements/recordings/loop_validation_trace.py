"""In-process validation far pairs for a PointMaze_Large-v3 bundle: the server's planner code, success at the
last step (as the sim); prints per episode the first step within 0.45 m, time within, final distance."""
import sys
import numpy as np
from l3p.serving.bundle import load_bundle
from l3p.core.episode import EpisodePlanner
from l3p.core.landmarks import LandmarkGraph
from l3p.clients.protocol import open_env, episode_plan, reset_options

bundle_dir, n = sys.argv[1], int(sys.argv[2])
over = dict(kv.split("=") for kv in sys.argv[3:])
over = {k: (v == "true") if v in ("true", "false") else float(v) for k, v in over.items()}
b = load_bundle(bundle_dir)
env = open_env(b.env_id, max_steps=1000)
plan = episode_plan(env, b.env_id, n, 1_500_000_000, "far", 10)
graph = LandmarkGraph(b.landmarks, b.value_fn, edges=b.edges)
cfg = b.planner_defaults.replace(**over)
wins = reached = 0
for seed, pair in plan:
    obs, _ = env.reset(seed=seed, options=reset_options(pair))
    ep = EpisodePlanner(graph, obs["desired_goal"], b.value_fn, cfg, seed=seed)
    goal = obs["desired_goal"]; first = None; inside = 0; dists = []
    for t in range(1000):
        r = ep.step(obs["observation"], b.distance_fn, b.policy_fn)
        obs, _, term, trunc, info = env.step(np.asarray(r.action, np.float32))
        d = float(np.linalg.norm(obs["achieved_goal"] - goal)); dists.append(d)
        if info.get("success"):
            inside += 1; first = t if first is None else first
    ok = bool(info.get("success")); wins += ok; reached += first is not None
    print(seed, pair, "success" if ok else "FAIL", f"first_in={first} steps_inside={inside} final={d:.2f} min={min(dists):.2f} last100_mean={np.mean(dists[-100:]):.2f}", flush=True)
print("wins", wins, "reached", reached, "of", n)
