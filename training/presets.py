"""Per-environment training presets and `preset`, which starts every run's config from them: the
measured settings of each shipped model and of the offline recipes, as data, and the named preset
options."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from l3p.core.commandline import did_you_mean
from l3p.core.config import PlannerConfig
from l3p.training.config import TrainConfig

# Per-environment presets; each shipped model's card (models/NAME/README.md) says how its preset
# was measured. TrainConfig's defaults keep the single-worker HER baseline's action_l2 1.0, noise 0.2 /
# random 0.3 and Polyak 0.95 once per cycle (the authors: 0.01, 0.1 / 0.2, 0.995 every 10 updates),
# with which the shipped FetchPush and FetchPickAndPlace models were trained.
PRESETS: dict[str, TrainConfig] = {
    "FetchReach-v4": TrainConfig(
        env_id="FetchReach-v4", total_env_steps=12_000, n_envs=2, warmup_episodes=10,
        updates_per_cycle=40, n_landmarks=20, planning_start_episodes=40, eval_every_cycles=20,
        checkpoint_every_cycles=20, gls_sample=1000, buffer_episodes=2_000,
    ),
    # Push: many episodes per cycle and few large-batch updates (the regime of multi-worker HER,
    # which learns Push); planning on 20 % of the episodes after 8 000 (the authors' Fetch values):
    # planned episodes are noise-free, and planning earlier took exploration away. Measured:
    # models/FetchPush-v4/README.md, docs/results/training.md.
    "FetchPush-v4": TrainConfig(
        env_id="FetchPush-v4", total_env_steps=1_500_000, n_envs=16, updates_per_cycle=40, batch_size=1024,
        buffer_episodes=40_000, planning_start_episodes=8_000, plan_eps=0.2, eval_every_cycles=50,
        checkpoint_every_cycles=50,
    ),
    # PickAndPlace: Push's measured settings, 3 M env steps (models/FetchPickAndPlace-v4/README.md).
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
    # learns short-range reaching only), evaluation on far start/goal pairs (>= 10 cells by BFS)
    # over the env's full 800 steps. The authors' PointMaze settings but for 200-step episodes x 4
    # envs, action_l2 0.05 with target updates every 10 steps, 50 extra landmarks, and d_max 40 /
    # local horizon 20 (adjacent cells are ~25 steps apart), each measured: models/PointMaze_Large-v3.
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
    # episodes with starts and goals anywhere, evaluation from one end of the U to the other over
    # the paper's 500 steps. The ant is made like the authors' (HIRO's) in l3p.sim.envs. The
    # authors' AntMaze settings but for batch 256 (more updates per wall second on one core), 50
    # extra landmarks, PointMaze's target schedule and noise, and goal_radius 0.3 (the ant learns
    # to stop on the goal), each measured: models/AntMaze_UMaze-v5/README.md.
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

# Medium (8 x 8, 26 free cells, 1000-step episodes, far pairs >= 8 cells): the UMaze settings with
# falls as failures (a fallen ant never gets up, and hindsight goals teach nothing against it),
# 100 landmarks (50 left much of the graph without a route at d_max 30) and the authors' Polyak
# 0.995 (a slower target), each measured: models/AntMaze_Medium-v5/README.md.
PRESETS["AntMaze_Medium-v5"] = PRESETS["AntMaze_UMaze-v5"].replace(
    env_id="AntMaze_Medium-v5", eval_min_cells=8, eval_max_steps=None, fall_is_failure=True,
    n_landmarks=100, polyak=0.995, planner=PlannerConfig(d_max=30.0, local_horizon=10.0, prune_failed=True),
)

# The Fetch box scenes (l3p.sim.box: the paper's Box-Distractor-PickAndPlace and Place-Inside-Box).
# The authors' settings but for 16 lockstep envs and 40 updates per cycle (the learner is the
# bottleneck on 2 cores) at Polyak 0.95 every 10 updates (their target speed per env step), 3 M
# env steps, and prune_failed (what makes manipulation landmarks chainable); Place-Inside-Box is
# evaluated on its in-box goal alone (the env declares its test variant). Measured:
# docs/results/box-scenes.md, models/FetchBoxDistractor-v0, models/FetchPlaceInsideBox-v0.
PRESETS["l3p/FetchBoxDistractor-v0"] = TrainConfig(
    env_id="l3p/FetchBoxDistractor-v0", total_env_steps=3_000_000, n_envs=16, updates_per_cycle=40,
    batch_size=1024, buffer_episodes=40_000, gamma=0.99, clip_return=50.0, action_l2=0.01, noise_eps=0.1,
    random_eps=0.2, relabel_p=0.8, future_step=50, polyak=0.95, target_update_every=10, n_landmarks=80,
    extra_landmarks=20, planning_start_episodes=6_000, plan_eps=0.5, planner=PlannerConfig(prune_failed=True),
    eval_every_cycles=50, checkpoint_every_cycles=50,
)
PRESETS["l3p/FetchPlaceInsideBox-v0"] = PRESETS["l3p/FetchBoxDistractor-v0"].replace(
    env_id="l3p/FetchPlaceInsideBox-v0")

# OGBench's point mazes, trained offline from a regenerated dataset (`l3p dataset`, then
# `l3p train --dataset FILE`). OGBench's value settings where they apply: γ 0.99, lr 3e-4, target
# Polyak 0.995 every step, expectile 0.9, goals 50 % from the trajectory's future, 30 % random;
# batch 512 and 3 x 256 networks for a 2-core machine. The point moves 0.2 m per step (a 4 m cell in
# ~20): d_max 40 joins landmarks about two cells apart; evaluation on OGBench's five tasks.
PRESETS["ogbench/pointmaze-large-v0"] = TrainConfig(
    env_id="ogbench/pointmaze-large-v0", collector="inline", gamma=0.99, clip_return=100.0, lr_actor=3e-4,
    lr_critic=3e-4, lr_value=3e-4, polyak=0.995, target_update_every=1, batch_size=512, updates_per_cycle=1000,
    relabel_p=0.5, random_goal_p=0.3, future_step=200, n_landmarks=80, offline_updates=200_000,
    planner=PlannerConfig(d_max=40.0, local_horizon=20.0, prune_failed=True), eval_pairs="tasks",
    eval_episodes=10, eval_every_cycles=10, checkpoint_every_cycles=10,
)
PRESETS["ogbench/pointmaze-medium-v0"] = PRESETS["ogbench/pointmaze-large-v0"].replace(
    env_id="ogbench/pointmaze-medium-v0", n_landmarks=50)
PRESETS["ogbench/pointmaze-giant-v0"] = PRESETS["ogbench/pointmaze-large-v0"].replace(
    env_id="ogbench/pointmaze-giant-v0", n_landmarks=150)

# OGBench's ant mazes, offline from a dataset regenerated by its protocol (`l3p expert`, then
# `l3p dataset antmaze-...`): the point maze's settings, since the ant crosses a 4 m cell in a
# similar number of steps (~30 at the datasets' 0.13 m per step; the point ~20); 2 in-training
# evaluation episodes per task. Measured on validation (no ant model ships yet): docs/guides/offline.md.
PRESETS["ogbench/antmaze-large-v0"] = PRESETS["ogbench/pointmaze-large-v0"].replace(
    env_id="ogbench/antmaze-large-v0", eval_episodes=2)
PRESETS["ogbench/antmaze-medium-v0"] = PRESETS["ogbench/antmaze-large-v0"].replace(
    env_id="ogbench/antmaze-medium-v0", n_landmarks=50)
PRESETS["ogbench/antmaze-giant-v0"] = PRESETS["ogbench/antmaze-large-v0"].replace(
    env_id="ogbench/antmaze-giant-v0", n_landmarks=150)

# OGBench's arm (l3p.sim.ogbench_manip: cube-double, scene, puzzle), offline from its play datasets
# (`l3p dataset NAME-play-v0`): the point maze's OGBench value settings, as nothing yet was measured
# on the arm to choose others; 2 in-training evaluation episodes per task.
for _arm in ("cube-double", "scene", "puzzle-3x3", "puzzle-4x4"):
    PRESETS[f"ogbench/{_arm}-v0"] = PRESETS["ogbench/pointmaze-large-v0"].replace(
        env_id=f"ogbench/{_arm}-v0", eval_episodes=2)
del _arm

OFFLINE_PRESETS = frozenset(k for k in PRESETS if k.startswith("ogbench/"))
"""The presets made for ``l3p train --dataset``; any other env's offline run takes
`RECORDINGS_RECIPE`."""


# An offline run on an env whose preset is an online one (its networks, gamma and targets kept), or
# on no env at all: goals 50 % from the window's future and 30 % from anywhere in the data (the
# online preset's relabel_p 0.85 and random_goal_p 0.2 would be over 1); windows of 40 steps (a
# robot's controller segments, which the shortest one would cut to a couple of steps); the
# data-graph bundle of configs/ogbench-offline.toml. Measured: benchmarks/recordings_loop.toml.
RECORDINGS_RECIPE = dict(
    offline_updates=50_000, relabel_p=0.5, random_goal_p=0.3, offline_window_steps=40, updates_per_cycle=1000,
    eval_every_cycles=25, eval_episodes=10, checkpoint_every_cycles=10, export_landmarks="gls",
    export_n_landmarks=200, export_graph="data")


@dataclass(frozen=True)
class PresetOption:
    """A named change to any env's preset (``l3p train --preset-option NAME``), made before --config
    and --set apply; the run's config.json holds the result, so a resumed run keeps it."""

    help: str
    device: str | None = None  # the learner's device; None: the preset's
    batch_scale: int = 1       # batch_size times this


PRESET_OPTIONS: dict[str, PresetOption] = {
    # A GPU update is launch-bound at these network sizes (the captured step measured 1.23 ms at batch
    # 256 and 1.20 ms at 1024 on an H200: docs/results/training.md), so 4x the rows cost about nothing.
    "gpu": PresetOption(help="the learner on CUDA with 4x the preset's batch", device="cuda", batch_scale=4),
}


def preset(env_id: str, options: tuple[str, ...] | list[str] = (), offline: bool = False) -> TrainConfig:
    """The preset for ``env_id``, or the defaults for an env without one (e.g. a user's own goal
    env, ``package.module:EnvClass``), with the named `PRESET_OPTIONS` applied in order; whether the
    env exists is checked when it is made. ``offline``: for a dataset, `RECORDINGS_RECIPE` over any
    preset not in `OFFLINE_PRESETS`."""
    cfg = dataclasses.replace(PRESETS[env_id]) if env_id in PRESETS else TrainConfig(env_id=env_id)
    if offline and env_id not in OFFLINE_PRESETS:
        cfg = cfg.replace(**RECORDINGS_RECIPE)
    for name in options:
        if name not in PRESET_OPTIONS:
            raise ValueError(f"unknown preset option {name!r}; the options are: {', '.join(PRESET_OPTIONS)}"
                             + did_you_mean(name, PRESET_OPTIONS))
        option = PRESET_OPTIONS[name]
        cfg = cfg.replace(device=option.device or cfg.device, batch_size=cfg.batch_size * option.batch_scale)
    return cfg
