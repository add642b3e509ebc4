"""Validation tasks in-process with a patched fallback: never the far goal while a landmark has a route."""
import sys, numpy as np
import l3p.core.episode as E
from l3p.serving.bundle import load_bundle
from l3p.core.landmarks import LandmarkGraph
from l3p.clients.protocol import open_env, episode_plan

orig = E.EpisodePlanner._choose
def choose(self, total):
    row = orig(self, total)
    n, d_sc, cfg = self._n, self._d_sc, self.config
    if PATCH and row == n and d_sc[n] > cfg.local_d_max:
        alt = d_sc[:n] + self._d_cg[:n]
        alt = np.where(self._pruned, np.inf, alt)
        if self._subgoal != E.GOAL: alt[self._subgoal] = np.inf
        if np.isfinite(alt).any(): return int(np.argmin(alt))
    return row
E.EpisodePlanner._choose = choose
PATCH = sys.argv[3] == "1"
OVER = {k: float(v) for k, v in (a.split("=") for a in sys.argv[4:])}
b = load_bundle(sys.argv[1]); env = open_env(b.env_id, max_steps=1000)
n_ep = int(sys.argv[2]); plan = episode_plan(env, b.env_id, n_ep, 1_500_000_000, "tasks")
graph = LandmarkGraph(b.landmarks, b.value_fn, edges=b.edges); wins = 0
for seed, task in plan:
    obs, _ = env.reset(seed=seed, options={"task_id": task}); goal = obs["desired_goal"]
    ep = E.EpisodePlanner(graph, goal, b.value_fn, b.planner_defaults.replace(**OVER), seed=seed)
    d0 = np.linalg.norm(obs["achieved_goal"] - goal)
    for t in range(1000):
        r = ep.step(obs["observation"], b.distance_fn, b.policy_fn)
        obs, _, term, trunc, info = env.step(r.action)
        if info.get("success"): break
    ok = bool(info.get("success")); wins += ok
    print(seed, task, ok, t, f"start {d0:.1f} final {np.linalg.norm(obs['achieved_goal'] - goal):.1f} z={obs['observation'][2]:.2f}", flush=True)
print("wins", wins, "of", n_ep)
