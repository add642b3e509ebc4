"""OGBench's point mazes and manipulation tasks as goal envs (l3p.sim.ogbench_mazes, l3p.sim.ogbench_manip)
and the regenerated datasets (l3p.sim.datasets, l3p.sim.play_datasets), checked against OGBench's own
envs and loader."""
from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from l3p.core.dataset import load_dataset
from l3p.sim import mazes, play_datasets
from l3p.sim.datasets import dataset_spec, generate, vertex_cells, write
from l3p.sim.envs import env_spec, make_env, task_options
from l3p.sim.ogbench_manip import BY_NAME, ENVS, XYZ_CENTER, XYZ_SCALE, CubeDouble
from l3p.sim.ogbench_mazes import MAZES, env_id
from l3p.sim.play_datasets import play_spec

ogbench = pytest.importorskip("ogbench")


@pytest.mark.parametrize("maze", MAZES)
def test_the_five_tasks_start_and_end_where_ogbench_puts_them(maze):
    ours = make_env(env_id(maze))
    theirs = gym.make(f"pointmaze-{maze}-v0")
    u = ours.unwrapped
    assert env_spec(ours).obs_dim == 2 and env_spec(ours).goal_dim == 2 and ours.spec.max_episode_steps == 1000
    for task in range(1, 6):
        _, info = theirs.reset(seed=task, options={"task_id": task})
        obs, _ = ours.reset(seed=task, options={"task_id": task})
        start, goal = u.task_cells(task)
        assert (start, goal) == (tuple(theirs.unwrapped.cur_task_info["init_ij"]),
                                 tuple(theirs.unwrapped.cur_task_info["goal_ij"]))
        # Same cells and the same noise bound (a quarter cell) around their centres.
        assert u.inner.xy_to_ij(obs["observation"]) == theirs.unwrapped.xy_to_ij(theirs.unwrapped.get_xy()) == start
        assert u.inner.xy_to_ij(obs["desired_goal"]) == theirs.unwrapped.xy_to_ij(info["goal"]) == goal
        assert np.abs(obs["desired_goal"] - np.array(u.inner.ij_to_xy(goal))).max() <= 1.0
        assert np.abs(obs["observation"] - np.array(u.inner.ij_to_xy(start))).max() <= 1.0
    # A task's start and goal are a pure function of the seed.
    a = ours.reset(seed=7, options={"task_id": 3})[0]
    b = ours.reset(seed=7, options={"task_id": 3})[0]
    np.testing.assert_array_equal(a["observation"], b["observation"])
    np.testing.assert_array_equal(a["desired_goal"], b["desired_goal"])
    assert task_options(ours, 7) == {"task_id": 3}
    ours.close()
    theirs.close()


def test_success_is_ogbenchs_flag_and_counts_from_the_first_arrival():
    env = make_env(env_id("large"))
    u = env.unwrapped
    env.reset(seed=0, options={"task_id": 2})
    u.inner.set_xy(u.goal + np.array([0.9, 0.0]))  # within OGBench's 1 m tolerance
    _, reward, terminated, _, info = env.step(np.zeros(2))
    assert info["success"] == 1.0 and info["success_now"] == 1.0 and reward == 0.0 and terminated
    u.inner.set_xy(u.goal + np.array([1.2, 0.0]))  # stepped on and left again: still a success, as OGBench counts
    _, reward, terminated, _, info = env.step(np.zeros(2))
    assert info["success"] == 1.0 and info["success_now"] == 0.0 and reward == -1.0 and terminated
    env.reset(seed=0, options={"task_id": 2})
    assert env.step(np.zeros(2))[4]["success"] == 0.0
    np.testing.assert_array_equal(u.compute_reward(np.zeros((2, 2)), np.array([[0.5, 0.5], [3.0, 0.0]]), None), [0, -1])
    env.close()


def test_the_oracle_steers_as_ogbenchs_and_reaches_every_task():
    env = make_env(env_id("large"))
    u = env.unwrapped
    rng = np.random.default_rng(0)
    for task in range(1, 6):
        env.reset(seed=task, options={"task_id": task})
        for _ in range(30):  # anywhere in the maze: our cached BFS gives OGBench's subgoal
            cell = mazes.free_cells(np.asarray(u.inner.maze_map))[rng.integers(40)]
            u.inner.set_xy(np.array(u.inner.ij_to_xy(cell)) + rng.uniform(-1.5, 1.5, 2))
            expected, _ = u.inner.get_oracle_subgoal(u.inner.get_xy(), u.goal)
            np.testing.assert_array_equal(u.oracle_subgoal(), expected)
        env.reset(seed=task, options={"task_id": task})
        for step in range(1000):  # as the datasets steer: with noise 0.5 (the bare oracle can stall on a corner)
            if env.step(np.clip(u.oracle_direction() + rng.normal(0, 0.5, 2), -1, 1))[4]["success"]:
                break
        assert step < 999, f"task {task}"
    env.close()


def test_the_layout_and_pictures_use_ogbenchs_coordinates():
    env = make_env(env_id("giant"))
    u = env.unwrapped
    layout, scaling, origin = mazes.maze_map(env), mazes.maze_scaling(env), mazes.maze_origin(env)
    assert layout.shape == (12, 16) and scaling == 4.0 and mazes.is_maze(env.spec.id)
    for i, j in [(1, 1), (10, 14), (5, 9)]:
        row = layout.shape[0] - 1 - i
        assert layout[row, j] == 0
        np.testing.assert_allclose(mazes.cell_center(layout, (row, j), scaling, origin), u.inner.ij_to_xy((i, j)))
    # The far-pair protocol pins cells of that layout.
    obs, _ = env.reset(seed=1, options=mazes.reset_options(((layout.shape[0] - 2, 1), (1, 14))))
    assert u.inner.xy_to_ij(obs["observation"]) == (1, 1) and u.inner.xy_to_ij(obs["desired_goal"]) == (10, 14)
    env.close()


def test_a_stitch_dataset_follows_the_protocol_and_is_deterministic(tmp_path):
    spec = dataset_spec("pointmaze-large-stitch-v0", episodes=12, steps=40)
    assert (spec.maze, spec.kind, spec.noise, spec.env_id) == ("large", "stitch", 0.5, "ogbench/pointmaze-large-v0")
    sizes = {name: (dataset_spec(name).episodes, dataset_spec(name).steps)  # OGBench's own sizes
             for name in ("pointmaze-giant-navigate-v0", "pointmaze-large-navigate-v0", "pointmaze-large-stitch-v0")}
    assert list(sizes.values()) == [(500, 2001), (1000, 1001), (5000, 201)]
    a = write(spec, 3, tmp_path / "a.npz")
    b = write(spec, 3, tmp_path / "b.npz")
    c = write(spec, 4, tmp_path / "c.npz")
    assert a == b != c
    d = load_dataset(tmp_path / "a.npz")
    assert d.observations.shape == (480, 2) and d.episode_lengths().tolist() == [40] * 12
    assert d.metadata["made_by"]["command"] == "l3p dataset pointmaze-large-stitch-v0 --seed 3 --episodes 12 --steps 40"
    assert np.abs(d.actions).max() <= 1.0 and d.actions.std() > 0.3  # oracle direction plus noise 0.5, clipped
    env = make_env(spec.env_id)
    layout = np.asarray(env.unwrapped.inner.maze_map)
    for first, last in d.episode_bounds():  # every goal exactly 4 cells from its start, by BFS
        start = env.unwrapped.inner.xy_to_ij(d.observations[first])
        goal = env.unwrapped.inner.xy_to_ij(d.desired_goals[first])
        assert mazes.bfs_cells(layout, start)[goal] == 4
        assert (d.desired_goals[first:last + 1] == d.desired_goals[first]).all()  # stitch: one goal, then stay
    env.close()


def test_a_navigate_dataset_draws_a_new_vertex_goal_on_arrival():
    arrays = generate(dataset_spec("pointmaze-medium-navigate-v0", episodes=2, steps=400), seed=0)
    env = make_env("ogbench/pointmaze-medium-v0")
    inner = env.unwrapped.inner
    vertices = set(vertex_cells(np.asarray(inner.maze_map)))
    goal_cells = [inner.xy_to_ij(g) for g in arrays["desired_goals"]]
    changes = [k for k in range(1, 800) if goal_cells[k] != goal_cells[k - 1] and k != 400]
    assert changes and set(goal_cells) <= vertices
    for k in changes:  # the point had just arrived within 1 m of the previous goal
        assert np.linalg.norm(arrays["observations"][k] - arrays["desired_goals"][k - 1]) <= 1.0 + 0.2 * np.sqrt(2)
    env.close()


# ----- the manipulation tasks (l3p.sim.ogbench_manip) and their play datasets (l3p.sim.play_datasets) -----


def goal_state(inner) -> None:
    """Put OGBench's task-mode env in its task's goal state: cubes on their targets, buttons, drawer
    and window as the goal has them."""
    import mujoco

    for i, mocap in enumerate(getattr(inner, "_cube_target_mocap_ids", [])):
        inner._data.joint(f"object_joint_{i}").qpos[:3] = inner._data.mocap_pos[mocap]
        inner._data.joint(f"object_joint_{i}").qpos[3:] = [1.0, 0.0, 0.0, 0.0]
    if hasattr(inner, "_target_button_states"):
        inner._cur_button_states = inner._target_button_states.copy()
        inner._apply_button_states()
    if hasattr(inner, "_target_drawer_pos"):
        inner._data.joint("drawer_slide").qpos[0] = inner._target_drawer_pos
        inner._data.joint("window_slide").qpos[0] = inner._target_window_pos
    mujoco.mj_forward(inner._model, inner._data)


@pytest.mark.parametrize("cls", ENVS, ids=lambda cls: cls.manipulation.name)
def test_a_manipulation_env_is_ogbenchs_with_its_tasks_lengths_and_goal_space(cls):
    m = cls.manipulation
    env = make_env(m.env_id)
    u = env.unwrapped
    spec = env_spec(env)
    assert spec.max_steps == gym.spec(m.ogbench_id).max_episode_steps  # OGBench's evaluation length
    assert (spec.obs_dim, spec.action_dim, u.num_tasks) == (u.inner.compute_observation().shape[0], 5, 5)
    assert spec.adapter.achieved_goal_indices == m.goal_indices and spec.goal_dim == len(m.goal_indices)
    for task in range(1, 6):
        obs, info = env.reset(seed=task, options={"task_id": task})
        goal = u.inner.cur_task_info
        np.testing.assert_array_equal(obs["desired_goal"], info["goal_observation"][list(m.goal_indices)])
        if "goal_xyzs" in goal:  # cubes: the targets, in the order OGBench permuted the cubes
            targets = (u.inner._data.mocap_pos[u.inner._cube_target_mocap_ids] - XYZ_CENTER) * XYZ_SCALE
            expected = (goal["goal_xyzs"] - XYZ_CENTER) * XYZ_SCALE
            assert sorted(map(tuple, targets.round(6))) == sorted(map(tuple, expected.round(6)))
            np.testing.assert_allclose(obs["desired_goal"], targets.reshape(-1), atol=0.02)  # settled on the table
        elif "goal_button_states" in goal:  # the puzzle
            np.testing.assert_array_equal(obs["desired_goal"], goal["goal_button_states"])
        else:  # the scene: cube x, y, z, two buttons, drawer x 18, window x 15
            g = goal["goal"]
            expected = [*((g["block_xyzs"][0] - XYZ_CENTER) * XYZ_SCALE), *g["button_states"], g["drawer_pos"] * 18,
                        g["window_pos"] * 15]
            np.testing.assert_allclose(obs["desired_goal"], expected, atol=0.02)
        # A frame shows the goal's cubes, or the buttons it toggles; the state now, no button.
        changed = sum(p.kind == "button" and abs(obs["desired_goal"][at][0] - obs["achieved_goal"][at][0]) > 0.5
                      for p, at in m.goal_slices)
        cubes = sum(p.kind == "cube" for p in m.goal)
        assert u.goal_points(obs["desired_goal"]).shape == (cubes + changed, 3)
        assert u.goal_points(obs["achieved_goal"]).shape == (cubes, 3)
        # The goal space is OGBench's oracle goal representation of the state, wherever the arm takes it.
        for _ in range(3):
            np.testing.assert_allclose(obs["achieved_goal"], u.inner.compute_oracle_observation(), atol=1e-12)
            obs = env.step(env.action_space.sample())[0]
    # An episode is a function of its seed: the start, the goal and the steps.
    runs = []
    for _ in range(2):
        obs, _ = env.reset(seed=11, options={"task_id": 4})
        runs.append([obs["observation"], obs["desired_goal"]] + [env.step(np.full(5, 0.3))[0]["observation"]
                                                                  for _ in range(5)])
    np.testing.assert_array_equal(np.concatenate(runs[0]), np.concatenate(runs[1]))
    assert env.reset(seed=3)[1]["task_id"] in range(1, 6) and task_options(env, 7) == {"task_id": 3}
    env.close()


@pytest.mark.parametrize("cls", ENVS, ids=lambda cls: cls.manipulation.name)
def test_manipulation_success_is_ogbenchs_flag_at_the_tasks_goal_state(cls):
    env = make_env(cls.manipulation.env_id)
    u = env.unwrapped
    for task in (1, 5):
        obs, _ = env.reset(seed=task, options={"task_id": task})
        assert u.compute_reward(obs["achieved_goal"], obs["desired_goal"], None) == -1.0
        obs, reward, terminated, _, info = env.step(np.zeros(5))
        assert (info["success"], reward, terminated) == (0.0, -1.0, False)
        goal_state(u.inner)
        obs, reward, terminated, _, info = env.step(np.zeros(5))
        assert (info["success"], info["success_now"], reward, terminated) == (1.0, 1.0, 0.0, True)
        np.testing.assert_allclose(obs["achieved_goal"], obs["desired_goal"], atol=0.05)
        # Moved off the goal and stepped on: still a success, as OGBench counts the episode.
        if getattr(u.inner, "_cube_target_mocap_ids", []):
            u.inner._data.joint("object_joint_0").qpos[0] += 0.1  # a cube 10 cm off
        else:
            u.inner._cur_button_states[0] ^= 1  # a button toggled
            u.inner._apply_button_states()
        obs, reward, terminated, _, info = env.step(np.zeros(5))
        assert (info["success"], info["success_now"], reward, terminated) == (1.0, 0.0, -1.0, True)
    env.close()
    # Relabelled goals: each part within OGBench's tolerance (4 cm for a cube, the very state for a button).
    goal = np.zeros((4, len(cls.manipulation.goal_indices)))
    achieved = goal.copy()
    achieved[1, 0], achieved[2, 0], achieved[3, -1] = 0.3, 0.45, 1.0
    first, last = cls.manipulation.goal[0].tolerance, cls.manipulation.goal[-1].tolerance
    near = [0.0, -float(0.3 > first), -float(0.45 > first), -float(1.0 > last)]
    np.testing.assert_array_equal(u.compute_reward(achieved, goal, None), near)


def test_the_manipulation_tasks_run_as_evaluation_tasks_in_videos(tmp_path):
    from l3p.clients.protocol import episode_plan
    from l3p.sim.envs import rendering_unavailable
    from l3p.sim.render import VideoRecorder, close_env

    env_id = CubeDouble.manipulation.env_id
    env = make_env(env_id)
    assert episode_plan(env, env_id, 7, 100, pairs="tasks") == [(100 + i, i % 5 + 1) for i in range(7)]
    env.close()
    why_not = rendering_unavailable(env_id)
    if why_not:
        pytest.skip(f"offscreen rendering unavailable: {why_not}")
    import imageio.v2 as imageio

    env = make_env(env_id, render=True, size=64)
    u = env.unwrapped
    obs, _ = env.reset(seed=0, options={"task_id": 1})
    # The goal shows where its cubes go: spheres drawn at OGBench's targets.
    targets = u.inner._data.mocap_pos[u.inner._cube_target_mocap_ids]
    np.testing.assert_allclose(u.goal_points(obs["desired_goal"]), targets, atol=2e-3)
    video = VideoRecorder(tmp_path / "cube.mp4", landmarks=obs["achieved_goal"][None])
    final = SimpleNamespace(subgoal=obs["desired_goal"], subgoal_index=-1, replanned=False)
    assert (u.render(markers=video._goal_markers(u, final)) != u.render()).any()
    for step in (None, final, final):
        video.capture(env, step, "task 1")
        env.step(env.action_space.sample())
    video.close()
    close_env(env)
    reader = imageio.get_reader(video.path)
    try:
        frames = [frame for frame in reader]
    finally:
        reader.close()
    assert len(frames) == 3 and frames[0].shape == (64, 64, 3) and frames[0].std() > 10  # the arm and cubes


def play(name: str, out, *options: str, sizes: tuple[int, int, int] = (2, 1, 60)) -> int:
    """``l3p dataset NAME`` of (episodes, validation episodes, steps)."""
    from l3p.cli import main

    episodes, val, steps = map(str, sizes)
    return main(["dataset", name, "--episodes", episodes, "--val-episodes", val, "--steps", steps, "--no-progress",
                 "--out", str(out), *options])


@pytest.mark.parametrize("name", ["cube-double-play-v0", "puzzle-3x3-play-v0"])
def test_a_play_dataset_loads_with_ogbenchs_loader_and_ours(name, tmp_path):
    spec = play_spec(name)
    assert (spec.episodes, spec.steps, spec.val_episodes) == (1000, 1001, 100)  # OGBench's sizes
    assert play(name, tmp_path / f"{name}.npz", "--workers", "1") == 0
    path = str(tmp_path / f"{name}.npz")
    ours, val = load_dataset(path), load_dataset(path.replace(".npz", "-val.npz"))
    manipulation = BY_NAME[spec.manipulation].manipulation
    assert ours.env_id == val.env_id == manipulation.env_id
    assert ours.episode_lengths().tolist() == [60, 60] and val.episode_lengths().tolist() == [60]
    made_by = ours.metadata["made_by"]
    assert made_by["command"] == f"l3p dataset {name} --seed 0 --episodes 2 --steps 60 --val-episodes 1"
    assert "regenerated" in made_by["protocol"]
    assert (made_by["split"], val.metadata["made_by"]["split"]) == ("train", "val")
    np.testing.assert_array_equal(ours.achieved_goals, ours.observations[:, list(manipulation.goal_indices)])
    assert np.abs(ours.actions).max() <= 1.0 and ours.actions.std() > 0.05
    # OGBench's loader reads both files; its oracle goal representation (made from qpos and
    # button_states alone) is our achieved goal, step for step.
    oraclerep = name.replace("-play", "-oraclerep-play")
    env, train, valid = ogbench.make_env_and_datasets(oraclerep, dataset_path=path, add_info=True)
    env.close()
    kept = ours.terminals < 0.5  # OGBench drops each episode's last step (it has no next observation)
    assert len(train["observations"]) == 2 * 59 and len(valid["observations"]) == 59
    np.testing.assert_array_equal(train["observations"], ours.observations[kept])
    np.testing.assert_allclose(train["oracle_reps"], ours.achieved_goals[kept], atol=1e-5)
    assert ("button_states" in train) == name.startswith("puzzle")
    assert set(train) >= {"observations", "actions", "terminals", "next_observations", "qpos", "qvel"}
    # ... and l3p train --dataset makes it its replay, in the env it names.
    from l3p.training.presets import preset
    from l3p.training.offline import OfflineTrainer

    cfg = preset(ours.env_id).replace(dataset=path, offline_updates=1, hidden=16, layers=1, torch_threads=1)
    trainer = OfflineTrainer(cfg, tmp_path / "run")
    assert trainer.replay.size == 2 and trainer.spec.goal_dim == len(manipulation.goal_indices)
    np.testing.assert_array_equal(trainer.replay.goal[1], ours.achieved_goals[-1])  # the trajectory's end


def test_a_play_dataset_is_the_same_over_any_split_of_workers_and_resumes(tmp_path, monkeypatch):
    from l3p.core.errors import L3PError

    name = "cube-double-play-v0"
    sizes = (12, 3, 30)  # 15 episodes: chunks 0 and 1
    assert play(name, tmp_path / "one.npz", "--workers", "1", "--seed", "5", sizes=sizes) == 0
    assert play(name, tmp_path / "two.npz", "--workers", "2", "--seed", "5", sizes=sizes) == 0  # a process each
    for one, two in (("one.npz", "two.npz"), ("one-val.npz", "two-val.npz")):
        assert load_dataset(tmp_path / one).metadata["sha256"] == load_dataset(tmp_path / two).metadata["sha256"]
    spec = play_spec(name, episodes=12, steps=30, val_episodes=3)
    folder = play_datasets.work_folder(tmp_path / "resumed.npz")
    play_datasets.make_chunks(spec, 5, folder, workers=1)
    (folder / "chunk-00001.npz").unlink()  # as if stopped while making it
    made = []
    original = play_datasets.make_chunk
    monkeypatch.setattr(play_datasets, "make_chunk", lambda *a: made.append(a[2]) or original(*a))
    digests = play_datasets.write(spec, 5, tmp_path / "resumed.npz", workers=1)
    assert made == [1] and not folder.exists()  # only the missing chunk, and the folder is gone when done
    monkeypatch.undo()
    assert digests == play_datasets.write(spec, 5, tmp_path / "afresh.npz", workers=1)
    play_datasets.make_chunks(spec, 5, folder, workers=1)
    with pytest.raises(L3PError, match="holds chunks of another run"):
        play_datasets.write(spec, 6, tmp_path / "resumed.npz", workers=1)


def test_the_play_names_and_options_are_checked(tmp_path, capsys):
    assert play("cube-triple-play-v0", tmp_path / "x.npz") != 0
    assert "{cube-double,scene,puzzle-3x3,puzzle-4x4}-play-v0" in capsys.readouterr().err
    assert play("scene-play-v0", tmp_path / "x.npz", "--expert", "p.npz") != 0
    assert "no --expert" in capsys.readouterr().err
    assert play("pointmaze-large-stitch-v0", tmp_path / "x.npz", "--workers", "2") != 0
    assert "for the play datasets" in capsys.readouterr().err
    # OGBench's scene check: a cube out of the cameras' sight is run again, one in the open drawer is not.
    qpos = np.zeros((3, 28))
    qpos[:, 14:17] = [0.4, 0.0, 0.02]
    assert play_datasets.healthy(qpos)
    qpos[1, 14:17] = [0.33, -0.35, 0.07]  # in the drawer
    assert play_datasets.healthy(qpos)
    qpos[2, 14:17] = [0.33, -0.35, 0.02]  # beside it, on the floor
    assert not play_datasets.healthy(qpos)
    qpos[2, 14:17] = [0.4, 0.3, 0.02]  # too far right
    assert not play_datasets.healthy(qpos)
