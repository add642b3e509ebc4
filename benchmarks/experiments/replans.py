"""One validation episode in-process (the server's planner code and the bundle's ONNX networks): each
re-plan of its first 400 steps (where the ant was, the subgoal picked, D, the counter, the landmarks
pruned), at the planner's action_scale A, and how the episode ended.

    python benchmarks/experiments/replans.py BUNDLE SEED TASK A [--max-steps T]
"""
from episodes import episode_parser, load, planner_episode

ap = episode_parser(episodes=False)
ap.add_argument("seed", type=int)
ap.add_argument("task", type=int)
ap.add_argument("action_scale", type=float)
a = ap.parse_args()
model = load(a.bundle)
env = model.env(a.max_steps)
episode = planner_episode(model, env, a.seed, a.task, model.config(action_scale=a.action_scale),
                          max_steps=a.max_steps, stop_on_fall=True)
print("goal", episode.goal.round(1))
for t, step in enumerate(episode.steps[:400]):
    if step.plan.replanned:
        print(t, step.achieved.round(1), "->", step.plan.subgoal_index, step.plan.subgoal.round(1),
              "D", round(step.plan.estimated_distance, 1), "counter", step.plan.counter, "pruned", step.pruned)
print("end", len(episode.steps) - 1, episode.success, episode.steps[-1].next_achieved.round(1))
