"""The oracle-driven success of expert policies on antmaze-large's five tasks, 50 validation episodes
per task (seeds 1 500 000 000 + i): how a run's checkpoint pick compares with its last policy on more
episodes than the run's selection used.

    python docs/measurements/ant-expert/validate.py POLICY.npz [POLICY.npz ...]
"""
import json
import sys

from l3p.core.mlp_policy import load_mlp_policy
from l3p.core.seeds import VALIDATION
from l3p.training.expert_eval import oracle_driven

for path in sys.argv[1:]:
    result = oracle_driven(load_mlp_policy(path), "large", 50, VALIDATION)
    print(path, json.dumps({k: result[k] for k in ("success_per_task", "success")}))
