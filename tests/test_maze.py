"""The maze protocol: success flag, far start/goal pairs, the maze runner over a real server, plots."""
from __future__ import annotations

import json
from collections import deque

import numpy as np
import pytest

from l3p import cli
from l3p.core import seeds
from l3p.core.errors import USAGE
from l3p.sim import mazes
from l3p.sim.draw import draw_maze_episode, plot_maze_episode
from l3p.sim.envs import VecGoalEnv, make_env
from server_proc import serve

MAZE = "PointMaze_Large-v3"


@pytest.fixture(scope="module")
def layout():
    env = make_env(MAZE)
    yield mazes.maze_map(env)
    env.close()


@pytest.fixture(scope="module")
def maze_bundle(tmp_path_factory):
    from bundles import export_untrained_bundle

    return export_untrained_bundle(tmp_path_factory.mktemp("maze") / MAZE, env_id=MAZE, n_landmarks=12)


def reference_bfs(layout: np.ndarray, start, goal) -> int:
    """Independent check: path length in cells by breadth-first search over a dict of visits."""
    seen, queue = {tuple(start): 0}, deque([tuple(start)])
    while queue:
        cell = queue.popleft()
        if cell == tuple(goal):
            return seen[cell]
        r, c = cell
        for nxt in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if layout[nxt] == 0 and nxt not in seen:
                seen[nxt] = seen[cell] + 1
                queue.append(nxt)
    return -1


# --------------------------------------------------------------------------- env adapter


def test_maze_success_flag_on_a_real_step():
    env = VecGoalEnv(MAZE, 2)
    obs = env.reset([3, 4])
    assert env.spec.max_steps == 800 and env.spec.goal_dim == 2
    # Env 0's goal is moved onto the ball, env 1's stays where reset put it (cells apart).
    env.envs[0].unwrapped.goal = obs["achieved_goal"][0].astype(np.float64)
    obs, success = env.step(np.zeros((2, 2), np.float32))
    far = np.linalg.norm(obs["achieved_goal"][1] - env.envs[1].unwrapped.goal)
    assert far > 0.45
    np.testing.assert_array_equal(success, [1.0, 0.0])  # info["success"], not "is_success"
    # The training reward agrees: 0 at the goal, -1 elsewhere.
    goals = np.stack([obs["achieved_goal"][0], env.envs[1].unwrapped.goal]).astype(np.float32)
    np.testing.assert_array_equal(env.compute_reward(obs["achieved_goal"], goals), [0.0, -1.0])
    env.close()


def test_training_episodes_can_be_shorter_than_the_env_limit():
    env = VecGoalEnv(MAZE, 1, max_episode_steps=100)
    assert env.spec.max_steps == 100
    env.reset([0])
    for _ in range(99):
        env.step(np.zeros((1, 2), np.float32))
    _, _, _, truncated, _ = env.envs[0].step(np.zeros(2, np.float32))
    assert truncated
    env.close()


# --------------------------------------------------------------------------- far pairs


def test_far_pairs_are_far_by_bfs_and_deterministic(layout):
    pairs = mazes.far_pairs(layout, 200, seed=123)
    assert len(pairs) == 200
    for start, goal in pairs:
        assert layout[start] == 0 and layout[goal] == 0
        assert reference_bfs(layout, start, goal) >= 10
        assert mazes.bfs_cells(layout, start)[goal] == reference_bfs(layout, start, goal)
    assert mazes.far_pairs(layout, 200, seed=123) == pairs
    assert mazes.far_pairs(layout, 200, seed=124) != pairs
    # Held-out and validation lists differ from each other and from the training-time eval list.
    lists = [mazes.far_pairs(layout, 100, s) for s in
             (seeds.HELD_OUT, seeds.VALIDATION, seeds.TRAINING_EVAL)]
    assert lists[0] != lists[1] != lists[2]
    # The whole range of long paths is represented, up to the maze's 19-cell maximum.
    lengths = {reference_bfs(layout, s, g) for s, g in mazes.far_pairs(layout, 2000, seed=0)}
    assert min(lengths) == 10 and max(lengths) == 19
    with pytest.raises(ValueError, match=">= 40 cells"):
        mazes.far_pairs(layout, 1, seed=0, min_cells=40)


def test_reset_options_pin_start_and_goal_cells(layout):
    env = make_env(MAZE)
    scaling = mazes.maze_scaling(env)
    for start, goal in mazes.far_pairs(layout, 5, seed=9):
        obs, _ = env.reset(seed=1, options=mazes.reset_options((start, goal)))
        # The env adds up to a quarter cell of noise around each cell's centre.
        assert np.abs(obs["achieved_goal"] - mazes.cell_center(layout, start, scaling)).max() <= 0.25 * scaling + 1e-9
        assert np.abs(obs["desired_goal"] - mazes.cell_center(layout, goal, scaling)).max() <= 0.25 * scaling + 1e-9
    env.close()


# --------------------------------------------------------------------------- runner over a real server


def test_maze_eval_over_a_real_server_on_far_pairs(maze_bundle, layout, tmp_path, capsys):
    out = tmp_path / "maze.json"
    seed = seeds.HELD_OUT
    with serve(maze_bundle) as port:
        assert cli.main(["eval", "--server", f"127.0.0.1:{port}", "--pairs", "far", "--episodes", "2",
                         "--seed", str(seed),
                         "--modes", "l3p,l3p@search=hard,l3p@prune_failed=true,naive@local_horizon=0,policy",
                         "--out", str(out), "--no-progress"]) == 0
    table = capsys.readouterr().out
    assert "far start/goal pairs" in table and "l3p@search=hard" in table
    report = json.loads(out.read_text())
    assert report["env_id"] == MAZE and report["pairs"] == "far"
    want = [{"start_cell": list(s), "goal_cell": list(g)} for s, g in mazes.far_pairs(layout, 2, seed)]
    assert list(report["modes"]) == ["l3p", "l3p@search=hard", "l3p@prune_failed=true",
                                     "naive@local_horizon=0", "policy"]
    for name, mode in report["modes"].items():
        episodes = mode["per_episode"]
        assert [e["pair"] for e in episodes] == want  # every variant on the same pairs and seeds
        assert [e["env_seed"] for e in episodes] == [seed, seed + 1]
        assert all(e["steps"] == 800 for e in episodes)  # the env's full evaluation length
        # Success is the maze's own flag: within 0.45 of the goal at the last step.
        assert all(e["success"] == (e["final_distance"] <= 0.45) for e in episodes)
    assert report["modes"]["policy"]["replans_per_episode"] == 0
    assert report["modes"]["naive@local_horizon=0"]["replans_per_episode"] == 800  # every step
    assert 0 < report["modes"]["l3p"]["replans_per_episode"] < 800


# --------------------------------------------------------------------------- plots


def test_maze_plot_axes_span_the_maze(layout):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    landmarks = rng.uniform(-5, 5, (6, 2))
    edges = np.where(rng.random((7, 7)) < 0.5, 1.0, np.inf)
    fig, ax = plt.subplots()
    traj = np.cumsum(rng.normal(0, 0.05, (31, 2)), axis=0)
    draw_maze_episode(ax, layout, 1.0, landmarks, edges, np.arange(6.0), traj, [0] * 10 + [3] * 10 + [-1] * 10,
                      np.zeros(2))
    assert ax.get_xlim() == (-6.0, 6.0) and ax.get_ylim() == (-4.5, 4.5)  # 12 x 9 cells of 1 m
    walls = [p for p in ax.patches if p.get_width() == 1.0]
    assert len(walls) == int((layout == 1).sum())
    plt.close(fig)


def test_l3p_plot_writes_a_png_of_a_served_episode(maze_bundle, tmp_path):
    out = tmp_path / "episode.png"
    with serve(maze_bundle) as port:
        assert cli.main(["plot", "--bundle", str(maze_bundle), "--server", f"127.0.0.1:{port}",
                         "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_plot_refuses_a_non_maze_bundle(push_bundle, tmp_path, capsys):
    assert cli.main(["plot", "--bundle", str(push_bundle), "--out", str(tmp_path / "x.png")]) == USAGE
    assert capsys.readouterr().err == (f"l3p plot: error: draws maze episodes only; {push_bundle} is a "
                                       "FetchPush-v4 model\n")
    assert not (tmp_path / "x.png").exists()
    assert cli.main(["plot", "--bundle", str(tmp_path), "--landmarks-only"]) == USAGE  # no bundle at all
    err = capsys.readouterr().err
    assert err.startswith("l3p plot: error: ") and err.count("\n") == 1 and str(tmp_path) in err


def test_plot_file_for_a_recorded_episode(layout, tmp_path):
    path = plot_maze_episode(tmp_path / "p.png", layout, 1.0, np.zeros((2, 2)), np.zeros((3, 3)),
                             np.array([1.0, np.inf]), np.zeros((3, 2)), [0, -1], np.ones(2), title="t")
    assert path.stat().st_size > 10_000


def test_the_episode_picture_marks_where_the_robot_fell(layout):
    from matplotlib.figure import Figure

    trajectory = np.array([[0.0, 0.0], [0.5, 0.0], [1.0, 0.5], [1.0, 0.6]])
    labels = {}
    for fell_at in (None, 2):
        ax = Figure().subplots()
        draw_maze_episode(ax, layout, 1.0, np.zeros((2, 2)), np.zeros((3, 3)), np.array([1.0, np.inf]),
                          trajectory, [0, 0, -1], np.ones(2), fell_at=fell_at)
        labels[fell_at] = {c.get_label(): c for c in ax.collections}
    assert not any(k.startswith("fell") for k in labels[None])
    marker = labels[2]["fell (step 2)"]
    np.testing.assert_array_equal(marker.get_offsets(), [[1.0, 0.5]])  # the position after step 2


def test_maze_video_is_a_top_down_mp4(maze_bundle, tmp_path):
    from test_runner import require_rendering, video_frames

    require_rendering()
    out = tmp_path / "maze.mp4"
    with serve(maze_bundle) as port:
        assert cli.main(["run", "--server", f"127.0.0.1:{port}", "--episodes", "1", "--pairs", "far",
                         "--video", str(out), "--video-size", "64"]) == 0
    frames = video_frames(out)
    assert len(frames) == 801 and frames[0].shape == (64, 64, 3)  # one per step plus the final state
    assert frames[0].std() > 0


def test_the_video_draws_the_models_landmarks(maze_bundle, tmp_path):
    """``l3p run --video`` gets the landmarks from GetModelInfo: the same frame with them has
    pixels turned pink where it had none."""
    from test_runner import require_rendering, video_frames

    from l3p.serving.bundle import load_bundle
    from l3p.sim.render import VideoRecorder, close_env

    require_rendering()
    env = make_env("PointMaze_Large-v3", render=True, size=240)
    try:
        frames = []
        for landmarks in (None, load_bundle(maze_bundle).landmarks):
            env.reset(seed=0)
            out = tmp_path / f"{landmarks is None}.mp4"
            video = VideoRecorder(out, landmarks=landmarks)
            video.capture(env, None, "")
            video.close()
            frames.append(video_frames(out)[0].astype(int))
    finally:
        close_env(env)
    plain, drawn = frames
    changed = np.abs(drawn - plain).sum(-1) > 60
    assert changed.sum() > 20, changed.sum()

    def pink(pixels):
        return (pixels[:, 0] + pixels[:, 2] - 2 * pixels[:, 1]).mean()

    assert pink(drawn[changed]) > pink(plain[changed]) + 50


def test_l3p_plot_landmarks_only_draws_the_served_graph(maze_bundle, tmp_path, capsys):
    """From the bundle alone (no server): the graph is cut at the bundle's served d_max."""
    from l3p.plot import landmark_edges
    from l3p.serving.bundle import load_bundle

    def plot(*extra):
        out = tmp_path / f"landmarks{len(extra)}.png"
        assert cli.main(["plot", "--bundle", str(maze_bundle), "--landmarks-only", "--out", str(out), *extra]) == 0
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
        return out

    bundle = load_bundle(maze_bundle)
    served = bundle.planner_defaults
    plot()
    assert f"graph at d_max {served.d_max:g} (served)" in capsys.readouterr().out
    plot("--planner", "l3p@d_max=3")
    assert "graph at d_max 3 (override)" in capsys.readouterr().out

    # The drawn block is the server's graph for any goal: edges are cut column by column.
    from l3p.core import pairwise_graph

    n = len(bundle.landmarks)
    edges = landmark_edges(bundle, served)
    for goal in (bundle.landmarks[-1], bundle.landmarks.mean(axis=0)):
        full = pairwise_graph(bundle.landmarks, goal, bundle.value_fn, served.d_max, served.adaptive_cut)
        np.testing.assert_array_equal(edges, full[:n, :n])
    strict = landmark_edges(bundle, served.replace(adaptive_cut=False))
    assert np.all(strict[np.isfinite(strict)] <= served.d_max)
