"""The Fetch box scenes (l3p.sim.box) against their facts: PickAndPlace's dims and reward, the in-box
goal's success region, a scripted pick-lift-over-lower, walls that hold under full-speed pushes,
starts clear of the box, the training goal mix, determinism, spawned processes; and a short real
training run on each scene, served and driven over gRPC."""
from __future__ import annotations

import json
import multiprocessing
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium_robotics")

import mujoco

from l3p.sim import box
from l3p.sim.envs import env_spec, evaluation_env_id, goal_adapter, make_env, rendering_unavailable
from l3p.sim.render import close_env
from server_proc import serve

ROOT = Path(__file__).resolve().parents[1]
SCENES = (box.DISTRACTOR_ID, box.PLACE_INSIDE_ID, box.PLACE_INSIDE_TEST_ID)


@pytest.fixture(scope="module")
def test_env():
    env = make_env(box.PLACE_INSIDE_TEST_ID)
    yield env
    close_env(env)


def grip_xyz(env) -> np.ndarray:
    u = env.unwrapped
    return u._utils.get_site_xpos(u.model, u.data, "robot0:grip").copy()


def place_block(env, xyz) -> None:
    """Teleport the block (upright, at rest) to ``xyz``."""
    u = env.unwrapped
    qpos = u._utils.get_joint_qpos(u.model, u.data, "object0:joint").copy()
    qpos[:3], qpos[3:] = xyz, (1.0, 0.0, 0.0, 0.0)
    u._utils.set_joint_qpos(u.model, u.data, "object0:joint", qpos)
    u._utils.set_joint_qvel(u.model, u.data, "object0:joint", np.zeros(6))
    mujoco.mj_forward(u.model, u.data)


def toward(env, target, grip: float) -> np.ndarray:
    """The action that moves the gripper toward ``target`` at up to full speed (5 cm a step)."""
    return np.append(np.clip((np.asarray(target) - grip_xyz(env)) * 20.0, -1.0, 1.0), grip).astype(np.float32)


def geoms(env, prefix: str) -> set[int]:
    m = env.unwrapped.model
    return {i for i in range(m.ngeom) if (mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) or "").startswith(prefix)}


def penetration(env, a: set[int], b: set[int]) -> float:
    """Deepest current contact penetration (m) between geoms in ``a`` and geoms in ``b``."""
    data = env.unwrapped.data
    return max([-c.dist for c in data.contact[:data.ncon]
                if (c.geom1 in a and c.geom2 in b) or (c.geom1 in b and c.geom2 in a)], default=0.0)


# --------------------------------------------------------------------------- the scene's facts


def test_dims_reward_and_episodes_are_pick_and_places():
    reference = make_env("FetchPickAndPlace-v4")
    rng = np.random.default_rng(0)
    achieved, desired = rng.uniform(1.0, 1.5, (2, 200, 3))
    desired[:100] = achieved[:100] + rng.uniform(-0.04, 0.04, (100, 3))  # half of them near
    try:
        ref_spec = env_spec(reference)
        for env_id in SCENES:
            env = make_env(env_id)
            try:
                spec = env_spec(env)
                assert (spec.obs_dim, spec.goal_dim, spec.action_dim, spec.max_steps) == (25, 3, 4, 50)
                assert (spec.action_low, spec.action_high, spec.max_steps) == (
                    ref_spec.action_low, ref_spec.action_high, ref_spec.max_steps)
                reward = env.unwrapped.compute_reward(achieved, desired, None)
                np.testing.assert_array_equal(reward, reference.unwrapped.compute_reward(achieved, desired, None))
                assert 0 < -reward.sum() < 200
                # The block rests at the same height, the gripper starts at the same place.
                assert env.unwrapped.height_offset == pytest.approx(reference.unwrapped.height_offset, abs=1e-6)
                np.testing.assert_allclose(env.unwrapped.initial_gripper_xpos, reference.unwrapped.initial_gripper_xpos,
                                           atol=1e-6)
            finally:
                close_env(env)
    finally:
        close_env(reference)


def test_gymnasiums_env_checker_passes():
    from gymnasium.utils.env_checker import check_env

    env = make_env(box.PLACE_INSIDE_ID)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        close_env(env)


def test_place_inside_box_is_evaluated_on_the_in_box_goal_alone():
    assert evaluation_env_id(box.PLACE_INSIDE_ID) == box.PLACE_INSIDE_TEST_ID
    assert evaluation_env_id(box.PLACE_INSIDE_TEST_ID) == box.PLACE_INSIDE_TEST_ID
    assert evaluation_env_id(box.DISTRACTOR_ID) == box.DISTRACTOR_ID
    env = make_env(box.PLACE_INSIDE_ID)
    try:
        adapter = goal_adapter(env)
        assert (adapter.success_key, adapter.reward_offset, adapter.prepend_achieved_goal) == ("is_success", 0.0, False)
    finally:
        close_env(env)


def test_landmark_pictures_draw_the_box_the_scene_declares():
    from l3p.sim.draw import goal_space_obstacles

    boxes = goal_space_obstacles(box.DISTRACTOR_ID)
    assert boxes.shape == (5, 2, 3)  # floor and four walls
    low, high = boxes[:, 0].min(axis=0), boxes[:, 1].max(axis=0)
    np.testing.assert_allclose(low, [1.14, 0.42, 0.40], atol=1e-9)  # 22 x 22 cm outside, 10 cm high
    np.testing.assert_allclose(high, [1.36, 0.64, 0.50], atol=1e-9)
    assert goal_space_obstacles("FetchPickAndPlace-v4").shape[0] == 0


def test_a_block_at_the_box_centre_succeeds_and_one_at_a_corner_fails(test_env):
    goal = box.IN_BOX_GOAL
    assert goal.tolist() == pytest.approx([1.25, 0.53, 0.435])
    for offset, expected in (((0.0, 0.0), True), ((0.06, 0.06), False), ((-0.06, 0.06), False)):
        obs, _ = test_env.reset(seed=5)
        np.testing.assert_array_equal(obs["desired_goal"], goal)
        place_block(test_env, goal + [*offset, 0.005])
        for _ in range(5):  # let it settle on the box floor, the gripper still and open
            obs, reward, _, _, info = test_env.step(np.array([0, 0, 0, 1], np.float32))
        assert obs["achieved_goal"][2] == pytest.approx(goal[2], abs=0.003)  # resting on the floor
        assert bool(info["is_success"]) is expected and reward == (0.0 if expected else -1.0)


def pick_and_place_in_box(env, seed: int) -> tuple[bool, np.ndarray]:
    """Scripted: over the block, down, grasp, lift above the walls, over the box, lower, release."""
    obs, _ = env.reset(seed=seed)
    z_over = box.BOX_WALL_TOP + 0.1
    block = obs["achieved_goal"].copy()
    phases = [([*block[:2], block[2] + 0.08], 1.0, 0.01), ([*block], 1.0, 0.01), ([*block], -1.0, None),
              ([*block[:2], z_over], -1.0, 0.02), ([*box.IN_BOX_GOAL[:2], z_over], -1.0, 0.02),
              ([*box.IN_BOX_GOAL[:2], box.IN_BOX_GOAL[2] + 0.02], -1.0, 0.01), (None, 1.0, None)]
    phase, held, info = 0, 0, {}
    for _ in range(env.spec.max_episode_steps):
        target, grip, tolerance = phases[phase]
        action = toward(env, target, grip) if target is not None else np.array([0, 0, 0, grip], np.float32)
        obs, _, _, _, info = env.step(action)
        held += 1
        done = held >= 3 if tolerance is None else np.linalg.norm(grip_xyz(env) - target) < tolerance
        if done and phase < len(phases) - 1:
            phase, held = phase + 1, 0
    return bool(info["is_success"]), obs["achieved_goal"]


def test_a_scripted_pick_lift_over_lower_lands_in_the_box(test_env):
    results = [pick_and_place_in_box(test_env, seed) for seed in range(10)]
    assert [ok for ok, _ in results] == [True] * 10, [np.round(xyz, 3).tolist() for _, xyz in results]


def push_into_wall(env, start_xy, direction, grasp: bool) -> tuple[float, bool]:
    """Grasp the block (or push it loose with the closed gripper behind it) into a wall at full speed
    for 20 steps. The deepest block-wall penetration (m) and whether the block ended inside the box."""
    env.reset(seed=0)
    z = env.unwrapped.height_offset
    place_block(env, [*start_xy, z])
    direction = np.asarray(direction, float)
    hand = np.asarray(start_xy) - (0 if grasp else 0.06) * direction
    for target, grip, steps in (([*hand, z + 0.1], 1.0 if grasp else -1.0, 10), ([*hand, z], 1.0 if grasp else -1.0, 10),
                                ([*hand, z], -1.0, 5)):
        for _ in range(steps):
            env.step(toward(env, target, grip))
    walls, block = geoms(env, "box0:"), geoms(env, "object0")
    far = [*(np.asarray(start_xy) + 0.5 * direction), z]  # always >= 5 cm ahead: full speed
    deepest = 0.0
    for _ in range(20):
        obs, *_ = env.step(toward(env, far, -1.0))
        deepest = max(deepest, penetration(env, walls, block))
    inside = bool(np.all(np.abs(obs["achieved_goal"][:2] - box.BOX_CENTER[:2]) < box.BOX_INNER_HALF))
    return deepest, inside


def test_walls_hold_the_block_under_full_speed_pushes(test_env):
    # With MuJoCo's default contacts the same 12 pushes put the block through a wall 6 times, 3.4-3.9 cm deep.
    centre = box.BOX_CENTER[:2]
    results = []
    for offset in (-0.05, 0.0, 0.05):
        for start, direction in ((centre + [offset, 0.17], (0, -1)), (centre + [0.17, offset], (-1, 0))):
            for grasp in (True, False):
                results.append(push_into_wall(test_env, start, direction, grasp))
    deepest = max(d for d, _ in results)
    assert [inside for _, inside in results] == [False] * 12
    assert 0.001 < deepest < 0.01, deepest  # the pushes reach the wall; the wall gives under a centimetre


def test_the_gripper_stops_on_a_wall_top(test_env):
    test_env.reset(seed=0)
    over_wall = [box.BOX_CENTER[0], box.BOX_CENTER[1] + 0.1]  # the north wall's centre line
    for _ in range(10):
        test_env.step(toward(test_env, [*over_wall, box.BOX_WALL_TOP + 0.08], -1.0))
    walls, fingers = geoms(test_env, "box0:"), geoms(test_env, "robot0:")
    deepest = 0.0
    for _ in range(15):  # full speed down, the target always 20 cm below the wall top
        test_env.step(toward(test_env, [*over_wall, box.BOX_WALL_TOP - 0.2], -1.0))
        deepest = max(deepest, penetration(test_env, walls, fingers))
    assert 0.0 < deepest < 0.01  # resting on the wall, not in it
    assert grip_xyz(test_env)[2] > box.BOX_WALL_TOP


def test_starts_never_overlap_the_box():
    for env_id in (box.DISTRACTOR_ID, box.PLACE_INSIDE_ID):
        env = make_env(env_id)
        try:
            gripper = env.unwrapped.initial_gripper_xpos[:2]
            starts = np.array([env.reset(seed=seed)[0]["achieved_goal"] for seed in range(400)])
        finally:
            close_env(env)
        gap = np.abs(starts[:, :2] - box.BOX_CENTER[:2]).max(axis=1) - box.BLOCK_HALF - box.BOX_OUTER_HALF
        assert gap.min() >= box.START_CLEARANCE  # the footprint stays >= 1 cm from the outer walls
        assert np.linalg.norm(starts[:, :2] - gripper, axis=1).min() >= 0.1
        assert np.abs(starts[:, :2] - gripper).max() <= 0.15
        # The box does claim part of PickAndPlace's start region: starts crowd in beside it, not into it.
        assert (starts[:, 1] < box.BOX_CENTER[1] + box.BOX_OUTER_HALF + box.BLOCK_HALF + 0.02).sum() > 0


def test_training_resets_draw_the_in_box_goal_a_fifth_of_the_time():
    shares = {}
    for env_id in SCENES:
        env = make_env(env_id)
        try:
            goals = np.array([env.reset(seed=seed)[0]["desired_goal"] for seed in range(2000)])
        finally:
            close_env(env)
        shares[env_id] = float(np.mean(np.all(goals == box.IN_BOX_GOAL.astype(goals.dtype), axis=1)))
    assert shares[box.DISTRACTOR_ID] == 0.0 and shares[box.PLACE_INSIDE_TEST_ID] == 1.0
    assert 0.17 < shares[box.PLACE_INSIDE_ID] < 0.23, shares


def rollout(env_id: str, seed: int) -> np.ndarray:
    env = make_env(env_id)
    try:
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        trace = [obs["observation"], obs["desired_goal"]]
        for _ in range(20):
            obs, *_ = env.step(env.action_space.sample())
            trace.append(obs["observation"])
        return np.concatenate(trace)
    finally:
        close_env(env)


def test_each_seed_replays_exactly_and_seeds_differ():
    for env_id in (box.DISTRACTOR_ID, box.PLACE_INSIDE_ID):
        np.testing.assert_array_equal(rollout(env_id, 11), rollout(env_id, 11))
        assert not np.array_equal(rollout(env_id, 11), rollout(env_id, 12))


def test_made_and_run_in_a_spawned_process_and_pickled():
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        remote = pool.apply(rollout, (box.PLACE_INSIDE_ID, 4))
    np.testing.assert_array_equal(remote, rollout(box.PLACE_INSIDE_ID, 4))
    env = make_env(box.PLACE_INSIDE_TEST_ID)
    try:
        copy = pickle.loads(pickle.dumps(env.unwrapped))
        assert copy.in_box_goal_p == 1.0
        copy.close()
    finally:
        close_env(env)


def test_presets_start_from_the_authors_settings():
    from l3p.training.presets import preset

    for env_id in (box.DISTRACTOR_ID, box.PLACE_INSIDE_ID):
        cfg = preset(env_id)
        assert cfg.env_id == env_id
        assert (cfg.gamma, cfg.clip_return, cfg.batch_size, cfg.action_l2, cfg.noise_eps, cfg.random_eps) == (
            0.99, 50.0, 1024, 0.01, 0.1, 0.2)
        assert (cfg.relabel_p, cfg.future_step, cfg.plan_eps, cfg.n_landmarks, cfg.extra_landmarks) == (
            0.8, 50, 0.5, 80, 20)
        assert (cfg.planning_start_episodes, cfg.planner.d_max, cfg.planner.local_horizon) == (6_000, 15.0, 10.0)
        assert cfg.planner.prune_failed  # served so: landmarks the block already sits on are not subgoals
        # The measured changes: a twentieth of an update per env step, the authors' target speed per env step.
        assert (cfg.n_envs, cfg.updates_per_cycle, cfg.polyak, cfg.target_update_every) == (16, 40, 0.95, 10)


# --------------------------------------------------------------------------- train, serve, run


def l3p(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MUJOCO_GL": "osmesa",
           "PYOPENGL_PLATFORM": "osmesa"}
    return subprocess.run([sys.executable, "-m", "l3p.cli", *args], check=False, cwd=cwd, capture_output=True,
                          text=True, timeout=600, env=env)


# Small networks and a short schedule: warm-up, updates, clusters, planned training episodes and both
# evaluations (policy and planner) on the scene's evaluation env.
TINY = ["n_envs=2", "warmup_episodes=2", "updates_per_cycle=4", "batch_size=64", "hidden=32", "layers=2",
        "ae_hidden=16", "n_landmarks=6", "extra_landmarks=3", "gls_sample=60", "cluster_batch=20",
        "planning_start_episodes=4", "eval_every_cycles=2", "eval_episodes=2", "checkpoint_every_cycles=2",
        "buffer_episodes=50", 'collector="inline"']


@pytest.fixture(scope="module", params=[box.PLACE_INSIDE_ID, box.DISTRACTOR_ID])
def box_bundle(request, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("box")
    sets = [a for kv in TINY for a in ("--set", kv)]
    r = l3p("train", "--env", request.param, "--steps", "400", "--out", "run", "--no-progress", *sets, cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    return request.param, cwd / "run"


def test_a_short_run_exports_a_bundle_the_server_loads_and_the_runner_drives(box_bundle, tmp_path):
    from l3p.clients.client import PlannerClient

    env_id, run = box_bundle
    manifest = json.loads((run / "bundle" / "manifest.json").read_text())
    assert manifest["env_id"] == env_id and manifest["provenance"]["env_steps"] == 400
    assert manifest["dims"] == {"obs": 25, "goal": 3, "action": 4}
    eval_id = evaluation_env_id(env_id)
    assert manifest["provenance"]["success"]["eval_env_id"] == eval_id  # the in-training evaluation's env
    rows = (run / "progress.csv").read_text().splitlines()
    assert len(rows) == 3 and "success_l3p" in rows[0]  # evaluated at cycles 2 and 4, the planner too
    with serve(run / "bundle") as port:
        server = f"127.0.0.1:{port}"
        with PlannerClient(server) as client:
            info = client.model_info()
        assert (info.env_id, info.obs_dim, info.goal_dim, info.action_dim, info.n_landmarks) == (env_id, 25, 3, 4, 6)
        out = tmp_path / "eval.json"
        r = l3p("eval", "--server", server, "--episodes", "2", "--modes", "policy,l3p", "--no-progress",
                "--out", str(out), cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        report = json.loads(out.read_text())
        assert (report["env_id"], report["model"]["env_id"], report["warnings"]) == (eval_id, env_id, [])
        for mode in ("policy", "l3p"):
            episodes = report["modes"][mode]["per_episode"]
            assert [e["steps"] for e in episodes] == [50, 50]
        why_not = rendering_unavailable(eval_id)
        video = tmp_path / "box.mp4"
        r = l3p("run", "--server", server, "--episodes", "2", "--seed", "3",
                *([] if why_not else ["--video", str(video), "--video-size", "64"]), cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        lines = [line for line in r.stdout.splitlines() if line.startswith("episode")]
        assert len(lines) == 2 and all("steps 50" in line for line in lines)
        summary = [line for line in r.stdout.splitlines() if line.startswith(f"{eval_id}  planner")]
        assert len(summary) == 1 and summary[0].startswith(f"{eval_id}  planner l3p")
        assert r.stdout.startswith(f"{eval_id}: 2 episodes, seeds 3..4 (training range)\n")  # seeds announced
        # Another env with the same dims is refused unless forced, as for any model.
        r = l3p("run", "--server", server, "--env", "FetchPickAndPlace-v4", "--episodes", "1", cwd=tmp_path)
        assert r.returncode != 0 and "trained on" in r.stderr
    # The landmark picture from the bundle alone, over the box the scene declares.
    picture = tmp_path / "landmarks.png"
    r = l3p("plot", "--bundle", str(run / "bundle"), "--landmarks-only", "--out", str(picture), cwd=tmp_path)
    assert r.returncode == 0 and f"{env_id}: 6 landmarks, graph at d_max 15 (served)" in r.stdout, r.stderr[-2000:]
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10_000
    if why_not:
        pytest.skip(f"offscreen rendering unavailable, video not checked: {why_not}")
    import imageio.v2 as imageio

    reader = imageio.get_reader(str(video))
    try:
        frames = [frame for frame in reader]  # list() asks the reader for a length it does not know
    finally:
        reader.close()
    assert len(frames) == 2 * 51 and frames[0].shape == (64, 64, 3) and frames[0].std() > 10
