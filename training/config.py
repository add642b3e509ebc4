"""Typed training configuration with per-environment presets.

Defaults start from the L3P authors' settings and are scaled to a 2-core machine: fewer parallel
envs, smaller batches, fewer updates per transition. Every run writes its exact config next to its
outputs (``config.json``), and the bundle manifest copies it.

The training-time planner is a `PlannerConfig` (``planner``); its options are also accepted as
top-level keys (``d_max=30`` in `TrainConfig.from_dict`, `TrainConfig.replace` and
``l3p train --set``), which is how configs written before it was nested store them.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from l3p.core.commandline import check_values, describe_config, did_you_mean, documented
from l3p.core.config import PlannerConfig

COLLECTORS = ("inline", "process", "ray")
"""Where episodes are collected: in the learner's process, in worker processes, in Ray actors."""

EVAL_PAIRS = ("random", "far", "tasks")
"""How evaluation episodes pick start and goal (see ``TrainConfig.eval_pairs``)."""

OFFLINE_EVALS = ("auto", "env", "held_out")
"""What an offline run measures at each evaluation (see ``TrainConfig.offline_eval``)."""

LANDMARK_KINDS = ("centroids", "gls", "centred")
"""A bundle's graph nodes: the decoded cluster centroids (L3P), GLS-spread achieved goals, or those
goals centred in the ground the data covers (training/export.py `centred_landmarks`)."""
SAMPLED_LANDMARKS = ("gls", "centred")
"""The kinds picked from the run's achieved goals, as many as ``export_n_landmarks``."""

GRAPHS = ("all", "data")
"""A bundle's graph edges: every pair V connects (Algorithm 1), or only those the run's data supports."""

EXPORT_KEYS = ("export_landmarks", "export_n_landmarks", "export_graph")
"""The bundle a run writes at its end and ``l3p export``'s defaults for it."""

PLACEMENT_KEYS = ("device", "cuda_graph", "collector", "collectors", "max_staleness", "ray_address",
                  "torch_threads", "overlap_updates", "log_every_updates") + EXPORT_KEYS
"""Where and how a run executes, what it reports and how it exports, not what it learns: a resumed
run may change them (a run started on a laptop continues on a GPU node with Ray workers)."""

PLANNER_KEYS = tuple(f.name for f in dataclasses.fields(PlannerConfig) if f.name != "mode")
"""Planner options accepted as top-level config keys (the mode is chosen per use, not configured)."""


@dataclass
class TrainConfig:
    """Every key of a training run (``l3p train --show-config`` lists them with their help)."""

    env_id: str = documented("FetchPush-v4", "the goal env: a registered id or package.module:EnvClass")
    seed: int = documented(0, "seeds the networks, the replay sampling and the collectors")
    collector: str = documented("process", "where episodes are collected: 'process' (worker processes, while "
                                "this one learns; each worker uses 1 thread), 'inline' (one process, collection "
                                "first, then the updates; the same run as one process worker) or 'ray' (Ray "
                                "actors; pip install -e '.[ray]'; ray_address)")
    collectors: int = documented(1, "rollout workers (process or ray): each steps its share of the n_envs envs "
                                 "with its own copy of the acting networks; all episodes go to one replay")
    max_staleness: int = documented(0, "0: every cycle stores every worker's episodes collected on the previous "
                                    "cycle's weights (reproducible for a fixed seed and worker count); k > 0: the "
                                    "learner goes on with the workers that are ready, waiting only for one whose "
                                    "weights are more than k cycles old (mean age: 'staleness' in progress.csv)")
    ray_address: str | None = documented(None, "Ray cluster to join ('auto', 'ray://head:10001'); null: a local one")
    device: str = documented("cpu", "the learner's torch device: cpu, cuda, cuda:N or auto (cuda when available); "
                             "workers and export always run on the CPU")
    cuda_graph: bool = documented(True, "on CUDA, replay each optimizer step as one captured CUDA graph; false, or "
                                  "a capture that fails (the reason is logged), runs it eagerly")
    overlap_updates: bool = documented(True, "run the landmark model's half of each optimizer step (V, "
                                       "autoencoder, clusters) in a second learner thread: same results, both "
                                       "cores learning")
    torch_threads: int = documented(1, "each learner thread's intra-op pool")

    # --- budget and collection ---
    total_env_steps: int = documented(200_000, "the online budget: env steps (l3p train --steps)")
    max_episode_steps: int | None = documented(None, "training episode length; null: the env's own limit")
    n_envs: int = documented(8, "episodes collected in lockstep per cycle")
    warmup_episodes: int = documented(100, "episodes of uniform random actions before any update")
    noise_eps: float = documented(0.2, "Gaussian exploration noise, fraction of the action's max")
    random_eps: float = documented(0.3, "probability of a uniform random action")
    updates_per_cycle: int = documented(40, "optimizer steps after each cycle of n_envs episodes (offline: one "
                                        "cycle is this many updates)")
    updates_per_env_step: float | None = documented(None, "online: optimizer steps per collected env step, in "
                                                    "place of updates_per_cycle (each cycle runs this ratio of the "
                                                    "env steps it stored; the fraction carries to the next cycle), so "
                                                    "the ratio holds whatever n_envs; null: updates_per_cycle")
    batch_size: int = documented(256, "transitions per optimizer step")
    buffer_episodes: int = documented(20_000, "replay capacity, episodes")

    # --- hindsight relabelling ---
    relabel_p: float = documented(0.8, "fraction of goals replaced by future achieved goals")
    future_step: int = documented(50, "hindsight window, steps ahead (50: the rest of a 50-step episode)")
    goal_radius: float | None = documented(None, "train on a stricter success than the env's: its reward and the "
                                           "achieved goal within this distance (null: the env's alone); "
                                           "evaluation keeps the env's own test")
    fall_is_failure: bool = documented(False, "a transition into a fall (an env that declares its torso, e.g. the "
                                       "ant) is a failure: critic target -1/(1 - gamma), whatever the goal")

    # --- DDPG with a distance critic ---
    gamma: float = documented(0.98, "discount")
    clip_return: float = documented(50.0, "critic targets clipped to [-clip_return, 0]")
    lr_actor: float = documented(1e-3, "actor learning rate")
    lr_critic: float = documented(1e-3, "distance critic learning rate")
    lr_value: float = documented(1e-3, "value V(goal, goal) learning rate")
    polyak: float = documented(0.95, "target weight kept at each target update")
    target_update_every: int | None = documented(None, "null: update the targets once after each cycle's updates; "
                                                 "k: every k optimizer steps")
    action_l2: float = documented(1.0, "actor penalty on the squared action")
    grad_norm_clip: float | None = documented(None, "rescale every network's gradient to at most this L2 norm; "
                                              "null: no clipping")
    hidden: int = documented(256, "units per hidden layer")
    layers: int = documented(3, "hidden layers")
    layer_norm: bool = documented(False, "LayerNorm after each hidden layer of the distance critic and V (as "
                                  "OGBench's value networks), which bounds how far bootstrapped estimates drift")
    clip_obs: float = documented(200.0, "observations clipped to this before normalizing")
    clip_norm: float = documented(5.0, "normalized inputs clipped to [-clip_norm, clip_norm]")
    norm_eps: float = documented(0.01, "the normalizers' minimum standard deviation")

    # --- latent landmarks ---
    n_landmarks: int = documented(80, "latent clusters: the bundle's landmarks")
    latent_dim: int = documented(16, "the reachability autoencoder's latent size")
    ae_hidden: int = documented(128, "the autoencoder's hidden units")
    lr_ae: float = documented(3e-4, "autoencoder learning rate")
    lr_clusters: float = documented(3e-4, "cluster centroids' learning rate")
    ae_lambda: float = documented(1.0, "weight of the autoencoder's reconstruction loss")
    gls_sample: int = documented(2000, "replay goals encoded for Greedy Latent Sparsification")
    cluster_batch: int = documented(150, "goals per cluster step")
    cluster_refresh_every: int = documented(5, "optimizer steps between GLS cluster-batch refreshes")
    cluster_every: int = documented(2, "one cluster step every this many optimizer steps")
    planning_start_episodes: int = documented(1000, "online: clusters and planned episodes start after this many "
                                              "episodes")
    plan_eps: float = documented(0.5, "fraction of episodes collected with the planner once it exists")
    extra_landmarks: int = documented(20, "GLS replay goals added as temporary nodes at train time")

    # --- offline: learn from a recorded dataset (core/dataset.py) instead of env steps ---
    dataset: str | None = documented(None, "train offline from this dataset (l3p train --dataset): no env step and "
                                     "no collector (evaluation still runs episodes in the env); the critic "
                                     "bootstraps only through recorded actions, the actor is behaviour-regularized")
    offline_updates: int = documented(300_000, "the offline budget: optimizer steps (l3p train --steps)")
    expectile: float = documented(0.9, "the critic's expectile over recorded continuations (0.5: the mean)")
    bc_alpha: float = documented(2.5, "actor: maximize (bc_alpha / mean|Q|) Q minus the distance to the data's "
                                 "action")
    actor_goal_steps: int | None = documented(None, "offline: the actor's goals are achieved goals 1..k steps ahead "
                                              "in the same recording, its behaviour term on every sample; the "
                                              "data graph's d_max then stops at V across k recorded steps unless "
                                              "the landmarks need more to join (training/edges.py); null: the "
                                              "critic's goals, the behaviour term only where they came from the "
                                              "same recording")
    random_goal_p: float = documented(0.2, "offline critic goals drawn from anywhere in the data (they teach what "
                                      "is far)")
    landmarks_after_updates: int = documented(20_000, "offline: clusters start once the latent space has trained "
                                              "this many updates")
    offline_window_steps: int | None = documented(None, "offline: the replay's episode length; each recorded "
                                                  "episode is cut into windows of this many steps, each starting "
                                                  "where the last ended (every transition kept), and an episode "
                                                  "shorter than it is left out (counted in the run's dataset "
                                                  "record); null: the shortest episode's length, in windows end to "
                                                  "end (each window's last transition and a longer episode's "
                                                  "remainder left out)")
    offline_eval: str = documented("auto", "offline: what each evaluation measures: 'env' (episodes in the "
                                   "dataset's env), 'held_out' (a held-out split of the recording: no env is made, "
                                   "none need exist) or 'auto' (env if the project can make the dataset's env and "
                                   "its mapping does not say simulator: false; else held_out, named at start)")
    success_radius: float | None = documented(None, "held_out: success (the critic's reward, the held-out "
                                              "measures) is the achieved goal within this distance of the goal, "
                                              "goal units; null: the dataset's mapping's success_radius")
    held_out_fraction: float = documented(0.1, "held_out: this fraction of the recording's episodes (at least "
                                          "one) is kept out of training and measured at every evaluation")

    # The training-time planner: training's planned episodes and evaluation use it; the bundle serves
    # it. Its prune_failed is served and evaluated with; training's own planned episodes follow
    # Algorithm 1 without it, and sample their subgoals.
    planner: PlannerConfig = documented(PlannerConfig(), "the planner's options (top-level keys: d_max, ...)")

    # --- the bundle: what the run writes at its end, and l3p export's defaults for its snapshots ---
    export_landmarks: str = documented("centroids", "the bundle's graph nodes: 'centroids' (the decoded cluster "
                                       "centroids, L3P), 'gls' (achieved goals of the replay or dataset, spread "
                                       "in the latent space by GLS: states the robot has been in) or 'centred' "
                                       "(those goals, each then moved to the middle of the recorded goals "
                                       "nearest it: off the walls the data keeps away from)")
    export_n_landmarks: int | None = documented(None, "export_landmarks 'gls' or 'centred': how many; null: "
                                                "n_landmarks")
    export_graph: str = documented("all", "the bundle's graph edges: 'all' (every pair V connects, Algorithm 1) or "
                                   "'data' (only edges the dataset or replay passes along; d_max and the planner "
                                   "options that follow the edges from the graph, training/edges.py)")

    # --- evaluation, logging, checkpoints ---
    eval_every_cycles: int = documented(25, "evaluate (a progress.csv row, a snapshot) every this many cycles")
    eval_episodes: int = documented(20, "episodes per evaluation and mode")
    eval_pairs: str = documented("random", "evaluation start/goal: 'random' (the env's own draw), 'far' (maze "
                                 "cells >= eval_min_cells apart by BFS, the paper's maze test) or 'tasks' (the env's "
                                 "fixed evaluation tasks, episode i on task i mod 5 + 1)")
    eval_min_cells: int = documented(10, "eval_pairs 'far': the minimum BFS distance, cells")
    eval_max_steps: int | None = documented(None, "evaluation episode length; null: the env's own limit")
    checkpoint_every_cycles: int = documented(25, "write the resumable checkpoint every this many cycles")
    log_every_updates: int = documented(1000, "every this many optimizer steps (checked after each cycle): a line "
                                        "on stderr with the mean losses, a row of losses.jsonl, TensorBoard "
                                        "scalars train/...; 0: none. Reporting only: the run learns the same")

    def __post_init__(self) -> None:
        if self.collector not in COLLECTORS:
            raise ValueError(f"collector must be one of {', '.join(COLLECTORS)}, got {self.collector!r}"
                             + did_you_mean(self.collector, COLLECTORS))
        if not 1 <= self.collectors <= self.n_envs:
            raise ValueError(f"collectors must be between 1 and n_envs ({self.n_envs}), got {self.collectors!r}")
        if self.collector == "inline" and self.collectors != 1:
            raise ValueError("collector 'inline' has one collector; use 'process' or 'ray' for more")
        if self.max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {self.max_staleness!r}")
        if not (self.device in ("cpu", "cuda", "auto") or self.device.startswith("cuda:")):
            raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {self.device!r}")
        if self.eval_pairs not in EVAL_PAIRS:
            raise ValueError(f"eval_pairs must be one of {', '.join(EVAL_PAIRS)}, got {self.eval_pairs!r}"
                             + did_you_mean(self.eval_pairs, EVAL_PAIRS))
        if not 0.5 <= self.expectile < 1.0:
            raise ValueError(f"expectile must be in [0.5, 1), got {self.expectile!r}")
        if not self.bc_alpha > 0:
            raise ValueError(f"bc_alpha must be > 0, got {self.bc_alpha!r}")
        used = self.relabel_p if self.dataset is not None else 0.0
        if not (0.0 <= self.random_goal_p and self.random_goal_p + used <= 1.0 + 1e-12):  # 1.0 - 0.8 < 0.2 in floats
            raise ValueError(f"random_goal_p must be >= 0 with relabel_p + random_goal_p <= 1, got "
                             f"{self.random_goal_p!r} (relabel_p {self.relabel_p!r})")
        if self.actor_goal_steps is not None and self.actor_goal_steps < 1:
            raise ValueError(f"actor_goal_steps must be >= 1 or null, got {self.actor_goal_steps!r}")
        if self.offline_window_steps is not None and self.offline_window_steps < 3:
            raise ValueError(f"offline_window_steps must be >= 3 or null, got {self.offline_window_steps!r}")
        if self.max_episode_steps is not None and self.max_episode_steps < 2:
            raise ValueError(f"max_episode_steps must be >= 2 or null, got {self.max_episode_steps!r}")
        if self.eval_max_steps is not None and self.eval_max_steps < 1:
            raise ValueError(f"eval_max_steps must be >= 1 or null, got {self.eval_max_steps!r}")
        if self.log_every_updates < 0:
            raise ValueError(f"log_every_updates must be >= 0, got {self.log_every_updates!r}")
        if self.export_landmarks not in LANDMARK_KINDS:
            raise ValueError(f"export_landmarks must be one of {', '.join(LANDMARK_KINDS)}, got "
                             f"{self.export_landmarks!r}" + did_you_mean(self.export_landmarks, LANDMARK_KINDS))
        if self.export_n_landmarks is not None and (self.export_landmarks not in SAMPLED_LANDMARKS
                                                    or self.export_n_landmarks < 2):
            raise ValueError(f"export_n_landmarks (>= 2) goes with export_landmarks 'gls' or 'centred', got "
                             f"{self.export_n_landmarks!r} with {self.export_landmarks!r} (the centroids are the "
                             f"run's n_landmarks clusters)")
        if self.export_graph not in GRAPHS:
            raise ValueError(f"export_graph must be one of {', '.join(GRAPHS)}, got {self.export_graph!r}"
                             + did_you_mean(self.export_graph, GRAPHS))
        if self.offline_eval not in OFFLINE_EVALS:
            raise ValueError(f"offline_eval must be one of {', '.join(OFFLINE_EVALS)}, got {self.offline_eval!r}"
                             + did_you_mean(self.offline_eval, OFFLINE_EVALS))
        if self.success_radius is not None and not self.success_radius > 0:
            raise ValueError(f"success_radius must be > 0 or null, got {self.success_radius!r}")
        if not 0.0 < self.held_out_fraction < 1.0:
            raise ValueError(f"held_out_fraction must be in (0, 1), got {self.held_out_fraction!r}")
        if self.eval_min_cells < 1:
            raise ValueError(f"eval_min_cells must be >= 1, got {self.eval_min_cells!r}")
        if self.goal_radius is not None and not self.goal_radius > 0:
            raise ValueError(f"goal_radius must be > 0 or null, got {self.goal_radius!r}")
        if self.grad_norm_clip is not None and not self.grad_norm_clip > 0:
            raise ValueError(f"grad_norm_clip must be > 0 or null, got {self.grad_norm_clip!r}")
        if self.updates_per_env_step is not None and not self.updates_per_env_step > 0:
            raise ValueError(f"updates_per_env_step must be > 0 or null, got {self.updates_per_env_step!r}")
        if self.updates_per_env_step is not None and self.dataset is not None:
            raise ValueError("updates_per_env_step counts collected env steps and an offline run (dataset) collects "
                             "none: its budget is offline_updates, in cycles of updates_per_cycle")
        if not isinstance(self.planner, PlannerConfig):
            raise TypeError(f"planner must be a PlannerConfig, got {type(self.planner).__name__}")
        self.planner.validate()
        if self.planner.mode != "l3p":
            raise ValueError("planner.mode is chosen per use (evaluation runs policy and l3p); "
                             "set a bundle's served mode with l3p export --planner mode=...")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "config") -> "TrainConfig":
        """The config ``to_dict`` wrote, or the older flat form (planner options at the top level);
        top-level planner options override the ``planner`` block's. A ConfigError (a ValueError)
        names the key, the value and the expected type; ``where``: the file or option read."""
        check(data, where)
        data = dict(data)
        planner = data.pop("planner", {})
        if isinstance(planner, PlannerConfig):
            planner = dataclasses.asdict(planner)
        planner = {**planner, **{k: data.pop(k) for k in PLANNER_KEYS if k in data}}
        return cls(**data, planner=PlannerConfig(**planner))

    def replace(self, **overrides: Any) -> "TrainConfig":
        """A copy with ``overrides``; planner options (``d_max=30``) go to the planner."""
        planner = {k: overrides.pop(k) for k in PLANNER_KEYS if k in overrides}
        if planner:
            overrides["planner"] = overrides.get("planner", self.planner).replace(**planner)
        return dataclasses.replace(self, **overrides)

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


SHOW_CONFIG = "l3p train --show-config lists them"


def check(values: dict[str, Any], where: str) -> None:
    """Raise ConfigError unless ``values`` are training config keys (planner options at the top level
    or in a ``planner`` table) with values of their types; see `l3p.core.commandline.check_values`."""
    check_values(TrainConfig, values, where, also=PLANNER_KEYS, listing=SHOW_CONFIG)
    if isinstance(values.get("planner"), dict):
        check_values(PlannerConfig, values["planner"], f"{where} planner" if where.startswith("-")
                     else f"{where}: planner")
    check_values(PlannerConfig, {k: v for k, v in values.items() if k in PLANNER_KEYS}, where)


def describe(config: TrainConfig) -> str:
    """Every key of ``config`` with its value, type and help (``l3p train --show-config``)."""
    return "\n".join(describe_config(config, skip=("mode",)))
