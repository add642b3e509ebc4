"""One validation episode in-process (the server's planner code and the bundle's ONNX networks): each
re-plan of its first 400 steps (where the ant was, the subgoal picked, D, the counter, the landmarks
pruned), at the planner's action_scale A, and how the episode ended.

    python docs/measurements/antmaze-offline/replans.py BUNDLE SEED TASK A
"""
import sys

from l3p.clients.protocol import open_env
from l3p.core.episode import EpisodePlanner
from l3p.core.landmarks import LandmarkGraph
from l3p.serving.bundle import load_bundle
from l3p.sim.envs import goal_adapter
b = load_bundle(sys.argv[1])
seed, task, scale = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
config = b.planner_defaults.replace(action_scale=scale)
env = open_env(b.env_id, max_steps=1000)
up = goal_adapter(env).uprightness
graph = LandmarkGraph(b.landmarks, b.value_fn, edges=b.edges)
obs, _ = env.reset(seed=seed, options={"task_id": task})
print("goal", obs["desired_goal"].round(1))
planner = EpisodePlanner(graph, obs["desired_goal"], b.value_fn, config, seed=seed)
for t in range(1000):
    step = planner.step(obs["observation"], b.distance_fn, b.policy_fn)
    if step.replanned and t < 400:
        print(t, obs["achieved_goal"].round(1), "->", step.subgoal_index, step.subgoal.round(1),
              "D", round(step.estimated_distance, 1), "counter", step.counter, "pruned", planner.pruned)
    obs, _, _, _, info = env.step(step.action)
    if info["success"] or up(obs["observation"]) < 0.0:
        break
print("end", t, info["success"], obs["achieved_goal"].round(1))
