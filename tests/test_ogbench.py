"""OGBench's point mazes as goal envs (l3p.sim.ogbench_mazes) and the regenerated datasets
(l3p.sim.datasets), checked against OGBench's own env."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from l3p.core.dataset import load_dataset
from l3p.sim import mazes
from l3p.sim.datasets import dataset_spec, generate, vertex_cells, write
from l3p.sim.envs import env_spec, make_env, task_options
from l3p.sim.ogbench_mazes import MAZES, env_id

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
