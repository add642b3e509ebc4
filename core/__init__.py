"""The planner core (numpy only): planner settings and names, the landmark graph and its search,
the Algorithm-1 episode, the bundle format, seed ranges and errors. Training plugs in torch
callables, serving onnxruntime ones; see docs/planner_api.md."""

from l3p.core.config import EPISODE_OPTIONS, OPTIONS, PlannerConfig, parse_variant
from l3p.core.episode import DISTANCE, POLICY, EpisodePlanner, Inference, StepResult
from l3p.core.landmarks import LandmarkGraph
from l3p.core.names import GOAL, MODES, SEARCHES
from l3p.core.search import distances_to_goal, pairwise_graph, shortest_paths_hard, shortest_paths_soft

__all__ = [
    "PlannerConfig", "EpisodePlanner", "StepResult", "Inference", "POLICY", "DISTANCE", "LandmarkGraph",
    "MODES", "SEARCHES", "GOAL", "OPTIONS", "EPISODE_OPTIONS", "parse_variant",
    "distances_to_goal", "pairwise_graph", "shortest_paths_hard", "shortest_paths_soft",
]
