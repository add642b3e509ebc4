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
from dataclasses import dataclass, field
from typing import Any

from l3p.core.config import PlannerConfig

COLLECTORS = ("inline", "process", "ray")
"""Where episodes are collected: in the learner's process, in worker processes, in Ray actors."""

PLACEMENT_KEYS = ("device", "cuda_graph", "collector", "collectors", "max_staleness", "ray_address",
                  "torch_threads", "overlap_updates")
"""Where and how a run executes, not what it learns: a resumed run may change them (a run started
on a laptop continues on a GPU node with Ray workers)."""

PLANNER_KEYS = tuple(f.name for f in dataclasses.fields(PlannerConfig) if f.name != "mode")
"""Planner options accepted as top-level config keys (the mode is chosen per use, not configured)."""


@dataclass
class TrainConfig:
    env_id: str = "FetchPush-v4"
    seed: int = 0
    # "process": episodes are collected in worker processes while this one learns (torch_threads
    # is the learner's, each worker uses 1); "inline": one process, collection first, then the
    # updates; "ray": the workers are Ray actors on a Ray cluster (pip install '.[ray]';
    # ray_address). Inline and one process worker give the same run (tests/test_collector.py).
    collector: str = "process"
    # Rollout workers (process or ray): each steps its share of the n_envs envs with its own copy
    # of the acting networks; all episodes go to the learner's one replay.
    collectors: int = 1
    # 0: synchronous, every cycle stores every worker's episodes collected on the previous cycle's
    # weights (a run is reproducible for a fixed seed and number of workers). k > 0: the learner
    # stores whichever workers' episodes are ready and goes on, waiting only for a worker whose
    # weights are more than k cycles old; the mean age is logged ("staleness" in progress.csv).
    max_staleness: int = 0
    ray_address: str | None = None      # Ray cluster to join ("auto", "ray://head:10001"); None: a local one
    # The learner's torch device: "cpu", "cuda", "cuda:N" or "auto" (cuda when available). Workers
    # and export always run on the CPU.
    device: str = "cpu"
    # On CUDA, replay each optimizer step as one captured CUDA graph (capturable Adam); False, or a
    # capture that fails (the reason is logged), runs it eagerly.
    cuda_graph: bool = True
    # The landmark model's half of each optimizer step (V, autoencoder, clusters) runs in a second
    # learner thread beside the policy half (critic, actor): same results, both cores learning
    # (training/agent.py). torch_threads is each thread's intra-op pool.
    overlap_updates: bool = True
    torch_threads: int = 1

    # --- budget and collection ---
    total_env_steps: int = 200_000
    max_episode_steps: int | None = None  # training episode length; None = the env's own limit
    n_envs: int = 8                     # episodes collected in lockstep per cycle
    warmup_episodes: int = 100          # uniform random actions, no updates
    noise_eps: float = 0.2              # Gaussian exploration noise, fraction of action max
    random_eps: float = 0.3             # probability of a uniform random action
    updates_per_cycle: int = 40         # optimizer steps after each cycle of n_envs episodes
    batch_size: int = 256
    buffer_episodes: int = 20_000

    # --- hindsight relabelling ---
    relabel_p: float = 0.8              # fraction of goals replaced by future achieved goals
    future_step: int = 50               # future window (steps ahead); 50 = rest of the episode
    # Train on a stricter success than the env's: its reward, and the achieved goal within this
    # distance of the goal (None: the env's alone). A policy rewarded anywhere inside the env's
    # radius learns to stop at its edge; evaluation always keeps the env's own success test.
    goal_radius: float | None = None
    # A transition into a fall (a robot whose env declares its torso, e.g. the ant, upside down)
    # is a failure: its critic target is the absorbing -1/(1 - gamma), whatever the goal. Without
    # it, hindsight goals teach nothing against falling (a fallen ant "reaches" where it lies).
    fall_is_failure: bool = False

    # --- DDPG with a distance critic ---
    gamma: float = 0.98
    clip_return: float = 50.0
    lr_actor: float = 1e-3
    lr_critic: float = 1e-3
    lr_value: float = 1e-3
    polyak: float = 0.95                # target weight kept at each target update
    # Target update schedule: None = once after each cycle's updates; k = every k optimizer steps
    # (how fast values propagate: one Bellman backup per ~1/(1 - polyak) target updates).
    target_update_every: int | None = None
    action_l2: float = 1.0
    # Every network's gradient is rescaled to at most this L2 norm before its step; None = no clipping.
    grad_norm_clip: float | None = None
    hidden: int = 256
    layers: int = 3
    clip_obs: float = 200.0
    clip_norm: float = 5.0
    norm_eps: float = 0.01

    # --- latent landmarks ---
    n_landmarks: int = 80
    latent_dim: int = 16
    ae_hidden: int = 128
    lr_ae: float = 3e-4
    lr_clusters: float = 3e-4
    ae_lambda: float = 1.0
    gls_sample: int = 2000             # replay goals encoded for Greedy Latent Sparsification
    cluster_batch: int = 150
    cluster_refresh_every: int = 5     # optimizer steps between GLS cluster-batch refreshes
    cluster_every: int = 2             # one cluster step every this many optimizer steps
    planning_start_episodes: int = 1000
    plan_eps: float = 0.5              # fraction of episodes collected with the planner
    extra_landmarks: int = 20          # GLS replay goals added as temporary nodes at train time

    # --- the planner: training's planned episodes and evaluation use it; the bundle serves it ---
    # (its prune_failed is served and evaluated with; training's own planned episodes follow
    # Algorithm 1 without it, and sample their subgoals).
    planner: PlannerConfig = field(default_factory=PlannerConfig)

    # --- evaluation, logging, checkpoints ---
    eval_every_cycles: int = 25
    eval_episodes: int = 20
    # "random": the env's own start/goal distribution; "far": maze start/goal cells >= eval_min_cells
    # apart by BFS (sim/mazes.py), the paper's maze test.
    eval_pairs: str = "random"
    eval_min_cells: int = 10
    eval_max_steps: int | None = None  # evaluation episode length; None = the env's own limit
    checkpoint_every_cycles: int = 25

    def __post_init__(self) -> None:
        if self.collector not in COLLECTORS:
            raise ValueError(f"collector must be one of {', '.join(COLLECTORS)}, got {self.collector!r}")
        if not 1 <= self.collectors <= self.n_envs:
            raise ValueError(f"collectors must be between 1 and n_envs ({self.n_envs}), got {self.collectors!r}")
        if self.collector == "inline" and self.collectors != 1:
            raise ValueError("collector 'inline' has one collector; use 'process' or 'ray' for more")
        if self.max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {self.max_staleness!r}")
        if not (self.device in ("cpu", "cuda", "auto") or self.device.startswith("cuda:")):
            raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {self.device!r}")
        if self.eval_pairs not in ("random", "far"):
            raise ValueError(f"eval_pairs must be 'random' or 'far', got {self.eval_pairs!r}")
        if self.max_episode_steps is not None and self.max_episode_steps < 2:
            raise ValueError(f"max_episode_steps must be >= 2 or null, got {self.max_episode_steps!r}")
        if self.eval_max_steps is not None and self.eval_max_steps < 1:
            raise ValueError(f"eval_max_steps must be >= 1 or null, got {self.eval_max_steps!r}")
        if self.eval_min_cells < 1:
            raise ValueError(f"eval_min_cells must be >= 1, got {self.eval_min_cells!r}")
        if self.goal_radius is not None and not self.goal_radius > 0:
            raise ValueError(f"goal_radius must be > 0 or null, got {self.goal_radius!r}")
        if self.grad_norm_clip is not None and not self.grad_norm_clip > 0:
            raise ValueError(f"grad_norm_clip must be > 0 or null, got {self.grad_norm_clip!r}")
        if not isinstance(self.planner, PlannerConfig):
            raise TypeError(f"planner must be a PlannerConfig, got {type(self.planner).__name__}")
        self.planner.validate()
        if self.planner.mode != "l3p":
            raise ValueError("planner.mode is chosen per use (evaluation runs policy and l3p); "
                             "set a bundle's served mode with l3p export --planner mode=...")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """The config ``to_dict`` wrote, or the older flat form (planner options at the top level);
        top-level planner options override the ``planner`` block's."""
        data = dict(data)
        planner = data.pop("planner", {})
        if isinstance(planner, PlannerConfig):
            planner = dataclasses.asdict(planner)
        planner = {**planner, **{k: data.pop(k) for k in PLANNER_KEYS if k in data}}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        try:
            planner_config = PlannerConfig(**planner)
        except TypeError:
            fields = {f.name for f in dataclasses.fields(PlannerConfig)}
            raise ValueError(f"unknown planner keys: {', '.join(sorted(set(planner) - fields))}") from None
        return cls(**data, planner=planner_config)

    def replace(self, **overrides: Any) -> "TrainConfig":
        """A copy with ``overrides``; planner options (``d_max=30``) go to the planner."""
        planner = {k: overrides.pop(k) for k in PLANNER_KEYS if k in overrides}
        if planner:
            overrides["planner"] = overrides.get("planner", self.planner).replace(**planner)
        return dataclasses.replace(self, **overrides)

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# Per-environment presets. FetchReach is solved by the policy alone in one short run; Push and
# PickAndPlace need far more data, so their presets use more lockstep envs and a larger batch.
# The defaults above keep the single-worker HER baseline's action_l2 1.0, noise 0.2 / random 0.3
# and Polyak 0.95 once per cycle (the authors: 0.01, 0.1 / 0.2, 0.995 every 10 updates): the
# shipped FetchPush and FetchPickAndPlace models were trained with them. Measured against them
# so far: the maze (see its preset: a large action penalty and per-cycle targets stalled learning
# there); on Push, the planning schedule and envs per cycle (see its preset), not these.
PRESETS: dict[str, TrainConfig] = {
    "FetchReach-v4": TrainConfig(
        env_id="FetchReach-v4", total_env_steps=12_000, n_envs=2, warmup_episodes=10,
        updates_per_cycle=40, n_landmarks=20, planning_start_episodes=40, eval_every_cycles=20,
        checkpoint_every_cycles=20, gls_sample=1000, buffer_episodes=2_000,
    ),
    # Push: many episodes per cycle and few large-batch updates, the regime of multi-worker HER
    # (which learns Push) rather than the single-worker one (which stalls at the trivial rate).
    # Planning on 20 % of the episodes after 8 000 (the authors' Fetch values), not on half of them
    # after 2 000: planned episodes are noise-free, and early on they took half the exploration
    # away. Measured with benchmarks/time_to_success.py (same trainer, seed 0, policy success on
    # the same 50 eval episodes): with 0.2 after 8 000, 0.5 / 0.9 / 0.95 first at 520 k / 620 k /
    # 740 k env steps (24.6 / 29.8 / 35.8 min); with 0.5 after 2 000, 0.34 at 660 k, no threshold
    # in 45 min. 32 envs per cycle (same 40 updates: half the updates per env step) ran 1.8x the env
    # steps/s but learned less per step: 0.5 / 0.9 / 0.95 first at 1.00 M / 1.28 M / 1.32 M env
    # steps (26.8 / 34.7 / 35.9 min), so 16 stays.
    "FetchPush-v4": TrainConfig(
        env_id="FetchPush-v4", total_env_steps=1_500_000, n_envs=16, updates_per_cycle=40, batch_size=1024,
        buffer_episodes=40_000, planning_start_episodes=8_000, plan_eps=0.2, eval_every_cycles=50,
        checkpoint_every_cycles=50,
    ),
    # PickAndPlace: Push's measured settings (the authors use the same Fetch settings for both, but
    # for γ 0.99 and planning after 6 000 episodes); published multi-worker HER needs ~2.6 M env
    # steps for 0.9. With these (models/FetchPickAndPlace-v4): policy 0.9 on 20 eval episodes first
    # at 1.32 M env steps, held-out 96 / 100 at 3 M.
    "FetchPickAndPlace-v4": TrainConfig(
        env_id="FetchPickAndPlace-v4", total_env_steps=3_000_000, n_envs=16, updates_per_cycle=40,
        batch_size=1024, buffer_episodes=40_000, planning_start_episodes=8_000, plan_eps=0.2,
        eval_every_cycles=50, checkpoint_every_cycles=50,
    ),
    "FetchSlide-v4": TrainConfig(env_id="FetchSlide-v4", total_env_steps=1_000_000),
    # PointMaze: long-horizon navigation (cells of 1 m; the point needs ~25 steps to cross one).
    "PointMaze_UMaze-v3": TrainConfig(
        env_id="PointMaze_UMaze-v3", gamma=0.99, n_landmarks=50, total_env_steps=300_000,
    ),
    "PointMaze_Medium-v3": TrainConfig(
        env_id="PointMaze_Medium-v3", gamma=0.99, n_landmarks=50, total_env_steps=600_000,
    ),
    # The paper's maze protocol: short training episodes (goals from random cells, so the policy
    # learns short-range reaching only) and evaluation on far start/goal pairs (>= 10 cells by BFS)
    # over the env's full 800 steps. The authors' PointMaze settings unless noted:
    # gamma 0.98 / clip 80, noise 0.2 / random 0.2, HER 0.85 over 80 steps, batch 512,
    # 50 landmarks, planning after 500 episodes.
    # Deliberate changes, each measured here:
    # - 200-step training episodes, 4 envs per cycle (the authors' length; ~8 cells of travel,
    #   cells are ~25 steps apart here). Measured against 100-step episodes x 8 envs, same
    #   updates per env step, 20 far pairs at 240 k env steps: policy 0.10 / l3p 0.25 (200 steps)
    #   vs 0.20 / 0.05 (100 steps, whose landmarks still sat half inside walls);
    # - action_l2 0.05, not 0.5, and target updates every 10 optimizer steps (Polyak 0.95, i.e.
    #   0.60 per 100-update cycle), not once per cycle: a first run with 0.5 and per-cycle
    #   updates had, at 94 k env steps, an actor whose |a| <= 0.1 (one step of force moves the
    #   distance by well under a step, so the penalty dominated) and a critic whose D saturated at
    #   ~6 steps for every goal (one Bellman backup per ~20 cycles);
    # - 50 extra training landmarks instead of 150 (a planned episode builds its graph over all
    #   nodes: 150 extras cost 1.8 s per cycle here, 50 cost 0.5 s);
    # - d_max 40 and local horizon 20 steps, since adjacent cells are ~25 steps apart (the
    #   authors' d_max 20 would cut nearly every edge); lr 1e-3 (our Fetch default);
    # - 600 k env steps (50 min here): on 100 validation far pairs (seeds 1.5e9) the
    #   planner (prune_failed, d_max 40) went 38 (240 k) -> 71 (320 k) -> 82 (480 k) -> 90 (600 k);
    # - served with prune_failed (validation at 600 k, d_max 40: 64 -> 90 with it) and d_max 30
    #   (`l3p export ... --planner d_max=30`; with prune_failed d_max 25 / 30 / 35 / 40 gave
    #   84 / 99 / 94 / 90); training's own planning keeps d_max 40 and Algorithm 1 as is.
    "PointMaze_Large-v3": TrainConfig(
        env_id="PointMaze_Large-v3", total_env_steps=600_000, max_episode_steps=200, n_envs=4,
        warmup_episodes=100, noise_eps=0.2, random_eps=0.2, updates_per_cycle=100, batch_size=512,
        buffer_episodes=10_000, relabel_p=0.85, future_step=80, gamma=0.98, clip_return=80.0,
        action_l2=0.05, polyak=0.95, target_update_every=10, n_landmarks=50, extra_landmarks=50,
        planning_start_episodes=500, plan_eps=0.5, eval_pairs="far",
        planner=PlannerConfig(d_max=40.0, local_horizon=20.0, prune_failed=True),
        eval_every_cycles=50, eval_episodes=20, checkpoint_every_cycles=50,
    ),
    # AntMaze (an 8-joint ant, 4 m cells; the paper's AntMaze-Hard protocol): 200-step training
    # episodes with starts and goals anywhere, evaluation from one end of the U to the other.
    # The ant is made like the authors' (HIRO's) in gymnasium's maze (l3p.sim.envs: one action every
    # 0.1 s, joints and velocities observed without contact forces, torso x, y in front: 29-d, as
    # theirs; motors weaker than theirs, gear 20). The authors' AntMaze settings unless noted: gamma 0.98, clip 100, HER over 100
    # steps, batch 1000, action_l2 0.05, gradient norms clipped at 15, 50 landmarks, d_max 20,
    # local horizon 10. Deliberate changes, each from a measurement here:
    # - the policy sees the torso's x, y: without it a first 400 k-step run stayed at training
    #   success 0.00 (the goal cannot be located from joint angles alone);
    # - batch 256, not 1000, at the authors' one optimizer step per 2 env steps (400 per 4 x 200-step
    #   cycle): on one core a batch-1000 update ran 27/s, a batch-256 one 88/s (107-d observation),
    #   so 2.5x the authors' update count per env step fits in the wall time that 1 per 5 at batch
    #   1000 took;
    # - 50 extra training landmarks, not 150 (the PointMaze preset measured 1.8 s vs 0.5 s per cycle
    #   for the planned episodes' graphs);
    # - target updates every 10 optimizer steps (Polyak 0.95) and noise 0.2 / random 0.2, as the
    #   PointMaze preset measured for short maze training episodes;
    # - buffer 10 000 episodes (2 M transitions) and planning after 500 episodes, as PointMaze;
    # - evaluation: the two end-to-end pairs (far pairs >= 6 cells apart are exactly (1,1) <-> (3,1))
    #   over the paper's 500 steps (the env's limit is 700: `l3p eval --max-steps 700` measures it);
    # - goal_radius 0.3 (the learner is paid only within 0.3 m; evaluation keeps the env's 0.45 m):
    #   without it 7 of the 27 held-out failures of the 560 k bundle ended 0.45-0.76 m off the goal
    #   (the ant arrived but did not stay), and the best of 7 snapshots to 880 k reached 82 of 100
    #   validation pairs; with it, 1 080 k reached 93 (and 94 of 100 more): models/AntMaze_UMaze-v5.
    # Measured on gymnasium's own ant rate (0.05 s per action, contact forces observed), d_max 30 /
    # horizon 15, 920 k env steps (2 h): training success 0.2, far pairs l3p 0/20, policy 0/20; the
    # policy reached open goals 3-8 m away but flipped in ~1 of 3 500-step episodes and walked 6-12 m
    # per 200 steps, short of the U's ~24 m in 500 such steps.
    "AntMaze_UMaze-v5": TrainConfig(
        env_id="AntMaze_UMaze-v5", total_env_steps=1_200_000, max_episode_steps=200, n_envs=4,
        warmup_episodes=100, noise_eps=0.2, random_eps=0.2, updates_per_cycle=400, batch_size=256,
        buffer_episodes=10_000, relabel_p=0.8, future_step=100, gamma=0.98, clip_return=100.0,
        action_l2=0.05, grad_norm_clip=15.0, polyak=0.95, target_update_every=10, n_landmarks=50,
        extra_landmarks=50, planning_start_episodes=500, plan_eps=0.5, eval_pairs="far", eval_min_cells=6,
        eval_max_steps=500, planner=PlannerConfig(d_max=20.0, local_horizon=10.0, prune_failed=True),
        eval_every_cycles=50, eval_episodes=20, checkpoint_every_cycles=50, goal_radius=0.3,
    ),
}

# Medium (8 x 8, 26 free cells, BFS diameter 11, 1000-step episodes): the UMaze settings; 50
# landmarks over 26 cells sit ~one cell (4 m, ~20-40 steps of 0.1 s) apart, hence d_max 30;
# far pairs >= 8 cells (116 ordered pairs, >= 32 m of path, far past what 200-step training
# episodes cover), over the env's own 1000 steps. Deliberate changes:
# - falls are failures (fall_is_failure): a first run (without goal_radius) reached 11 of 40
#   validation far pairs at 800 k env steps (d_max 40); in 17 of its 29 failures the ant had
#   fallen on its back (4 more stood still, 7 wandered, 1 pressed for the goal through a wall),
#   and it fell in 9 % of its last 3 000 200-step training episodes, never getting up: over 1000
#   steps that alone loses ~40 % of the episodes. With it (runs/AntMaze_Medium-v5-r04) the ant
#   fell in 3.5-7 % of the training episodes from 320 k to 720 k (that first run: 6-12 %);
# - 100 landmarks, not 50: that run's value net counts ~10.5 steps per metre (the first's 9.4), so
#   50 landmarks ~2 m apart left 30-52 % of them without a route to the goal at d_max 30 (20
#   validation pairs at 520 k and 720 k; the first run: none), and the planner walked at the far
#   goal instead: 2 and 1 of 40 validation pairs, 9 and 5 at d_max 40. 100 sit ~1.5 m apart:
#   runs/AntMaze_Medium-v5-r05 reached 14 of 40 at 400 k (d_max 30 and 40 alike; policy 0), 2 to
#   24 of 40 over its snapshots to 1.2 M, and 54 / 100 held out at 1.12 M (policy 0): the policy's
#   swings between snapshots, falls and frozen poses, not the graph, now set the rate (README);
# - the authors' Polyak 0.995 (every 10 updates), not 0.95: 0.95 leaves 0.13 of a target after
#   800 env steps, 0.995 0.82. runs/AntMaze_Medium-v5-r08 (this preset, seed 0) reached 36 to 64
#   of 100 validation pairs from 600 k to 1.2 M (r05's best: 52) and 68 / 100 held out at 1.2 M
#   (policy 0): models/AntMaze_Medium-v5.
PRESETS["AntMaze_Medium-v5"] = PRESETS["AntMaze_UMaze-v5"].replace(
    env_id="AntMaze_Medium-v5", eval_min_cells=8, eval_max_steps=None, fall_is_failure=True,
    n_landmarks=100, polyak=0.995, planner=PlannerConfig(d_max=30.0, local_horizon=10.0, prune_failed=True),
)

# The Fetch box scenes (l3p.sim.box: the paper's Box-Distractor-PickAndPlace and Place-Inside-Box,
# FetchPickAndPlace with an open box on the table). The authors' settings for both unless noted:
# gamma 0.99, clip 50, batch 1024, action_l2 0.01, noise 0.1 / random 0.2, HER 0.8 over 50 steps,
# plan_eps 0.5, 80 landmarks + 20 extra, planning after 6 000 episodes (~300 k env steps), d_max 15
# and local horizon 10 (the planner's defaults). Place-Inside-Box trains on its goal mix (in-box goal
# on 20 % of resets) and is evaluated on the in-box goal alone: the env declares its test variant
# (l3p/FetchPlaceInsideBoxTest-v0), which the trainer's evaluation and `l3p eval` use.
# Deliberate changes:
# - 16 lockstep envs and 40 optimizer steps per cycle (1 per 20 env steps), not 12 workers at 1 per
#   2: the learner is the bottleneck here (benchmarks/train_throughput.py --env
#   l3p/FetchPlaceInsideBox-v0 --cycles 3, beside another training run: 9.7 batch-1024 optimizer
#   steps/s alone, 4.6/s and 93 env steps/s in training, bare env 1 110 steps/s); the shipped
#   PickAndPlace run made 16.5 optimizer steps/s, so the authors' ratio would cap it at ~33 env
#   steps/s (3 M env steps in ~25 h, not 2.5 h). With 1 per 20 the PickAndPlace preset learned
#   PickAndPlace (0.9 at 1.32 M env steps), and 16 envs per cycle learned Push faster per env step
#   than 32;
# - target updates every 10 optimizer steps at Polyak 0.95, not 0.995: the authors' target speed per
#   env step at a tenth of their updates (0.995^30 = 0.86 per 600 env steps there, 0.95^4 = 0.81
#   per 800 here);
# - 3 M env steps, the budget that took PickAndPlace to 96 / 100 held-out;
# - served and evaluated with prune_failed: its "already there" exclusion is what makes manipulation
#   landmarks chainable. Measured on models/FetchPush-v4 (100 held-out episodes through gRPC,
#   planner forced through landmarks with local_horizon=0): 25 / 100 without it, 96 / 100 with it
#   (policy 99); the exclusion alone gives the 96, pruning failed subgoals alone 26. Landmarks are
#   block positions: D(state, landmark) is 0 for one the block already sits on (within the 5 cm
#   success radius), while V(landmark, goal) comes from replay states where the gripper is already
#   at the block, so 0 + V beat the direct D(state, goal) on 90 / 90 starts (median 5.9 vs 9.9
#   steps) and the planner hopped between landmarks under the block.
PRESETS["l3p/FetchBoxDistractor-v0"] = TrainConfig(
    env_id="l3p/FetchBoxDistractor-v0", total_env_steps=3_000_000, n_envs=16, updates_per_cycle=40,
    batch_size=1024, buffer_episodes=40_000, gamma=0.99, clip_return=50.0, action_l2=0.01, noise_eps=0.1,
    random_eps=0.2, relabel_p=0.8, future_step=50, polyak=0.95, target_update_every=10, n_landmarks=80,
    extra_landmarks=20, planning_start_episodes=6_000, plan_eps=0.5, planner=PlannerConfig(prune_failed=True),
    eval_every_cycles=50, checkpoint_every_cycles=50,
)
PRESETS["l3p/FetchPlaceInsideBox-v0"] = PRESETS["l3p/FetchBoxDistractor-v0"].replace(
    env_id="l3p/FetchPlaceInsideBox-v0")


def preset(env_id: str) -> TrainConfig:
    """The preset for ``env_id``, or the defaults for an env without one (e.g. a user's own goal
    env, ``package.module:EnvClass``); whether the env exists is checked when it is made."""
    if env_id not in PRESETS:
        return TrainConfig(env_id=env_id)
    return dataclasses.replace(PRESETS[env_id])
