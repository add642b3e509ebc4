"""The oracle-driven success of expert policies on antmaze-large's five tasks, 50 validation episodes
per task (seeds 1 500 000 000 + i): how a run's checkpoint pick compares with its last policy on more
episodes than the run's selection used.

    python benchmarks/experiments/validate.py POLICY.npz [POLICY.npz ...] [--maze M] [--episodes-per-task K]
        [--max-steps T]
"""
import argparse
import json

from l3p.core.mlp_policy import load_mlp_policy
from l3p.core.seeds import VALIDATION
from l3p.training.expert_eval import oracle_driven

ap = argparse.ArgumentParser()
ap.add_argument("policies", nargs="+", metavar="POLICY.npz")
ap.add_argument("--maze", default="large", help="OGBench's ant maze: medium, large or giant")
ap.add_argument("--episodes-per-task", type=int, default=50)
ap.add_argument("--max-steps", type=int, help="steps per episode (default: the env's 1,000)")
a = ap.parse_args()
for path in a.policies:
    result = oracle_driven(load_mlp_policy(path), a.maze, a.episodes_per_task, VALIDATION, max_steps=a.max_steps)
    print(path, json.dumps({k: result[k] for k in ("success_per_task", "success")}))
