"""Pictures in the model cards and the docs: their text is readable at the width the pages show them.

A page shows a picture at most as wide as its column (the docs' is 998 px at a 1280 px window,
GitHub's README column ~830 px; SHOWN_PX on narrower screens), scaled down, never up. Text of s points
in a figure W inches wide saved at d dpi is then s / 72 * min(d, SHOWN_PX / W) px tall; every text
in every picture must be at least MIN_PX there.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from l3p.sim.draw import plot_landmarks, plot_learning_curve, plot_maze_episode  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHOWN_PX, MIN_PX = 700, 11


@pytest.fixture
def saved(monkeypatch) -> list[tuple[Figure, float]]:
    """Every figure saved while the test runs, with the dpi it was saved at."""
    figures = []
    real = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        dpi = kwargs.get("dpi") or matplotlib.rcParams["savefig.dpi"]
        figures.append((self, self.dpi if dpi == "figure" else float(dpi)))
        return real(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figures


def too_small(figure: Figure, dpi: float) -> list[tuple[str, float]]:
    """The texts (and their height in px as shown) under MIN_PX; ticks and legends included."""
    px_per_point = min(dpi, SHOWN_PX / figure.get_figwidth()) / 72
    texts = [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert texts
    return [(t.get_text()[:40], round(t.get_fontsize() * px_per_point, 1)) for t in texts
            if t.get_fontsize() * px_per_point < MIN_PX]


def test_a_large_maze_episode_reads_at_the_page_width(saved, tmp_path):
    layout = np.ones((12, 16), dtype=int)  # the giant maze's size: 16 cells across
    layout[1:-1, 1:-1] = 0
    rng = np.random.default_rng(0)
    landmarks = rng.uniform(-6, 6, (20, 2))
    edges = np.where(rng.random((21, 21)) < 0.2, 1.0, np.inf)
    trajectory = np.cumsum(rng.normal(0, 0.1, (41, 2)), axis=0)
    plot_maze_episode(tmp_path / "maze.png", layout, 1.0, landmarks, edges, np.arange(20.0), trajectory,
                      [0] * 20 + [3] * 10 + [-1] * 10, np.zeros(2), fell_at=30,
                      title="ogbench/pointmaze-giant-v0: l3p (soft search, d_max 17.84 (served), prune_failed), "
                            "seed 2000000000, task 3: success in 512 steps, 40 re-plans")
    (figure, dpi), = saved
    assert too_small(figure, dpi) == []


def test_goal_space_landmarks_read_at_the_page_width(saved, tmp_path):
    rng = np.random.default_rng(0)
    plot_landmarks(rng.uniform(0, 1, (30, 3)), rng.uniform(0, 1, (200, 3)), tmp_path / "lm.png",
                   "l3p/FetchBoxDistractor-v0: 80 landmarks, graph at d_max 15 (served), adaptive cut")
    (figure, dpi), = saved
    assert too_small(figure, dpi) == []


def test_a_learning_curve_reads_at_the_page_width(saved, tmp_path):
    history = [{"env_steps": 40_000 * k, "success_policy": k / 30, **({"success_l3p": k / 40} if k > 3 else {})}
               for k in range(1, 31)]
    plot_learning_curve(history, tmp_path / "curve.png", "AntMaze_Medium-v5",
                        "L3P planner, training settings (d_max 30, local horizon 10)")
    (figure, dpi), = saved
    assert too_small(figure, dpi) == []


def test_the_learning_speed_benchmarks_picture_reads_at_the_page_width(saved, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    learning_speed = importlib.import_module("learning_speed")
    curve = [{"env_steps": 40_000 * k, "wall_time_s": k, "success_policy": k / 30, "success_l3p": k / 35}
             for k in range(1, 31)]
    result = {"env_id": "l3p/FetchPlaceInsideBox-v0", "common_env_steps": 1_200_000,
              "runs": [{"label": f"FetchPlaceInsideBox-v0{name} (plan_eps {eps})", "curve": curve}
                       for name, eps in (("", 0.5), ("-noplan", 0))]}
    learning_speed.plot(result, tmp_path / "speed.png", 5)
    (figure, dpi), = saved
    assert too_small(figure, dpi) == []


def test_l3p_plot_learning_curve_redraws_a_shipped_models_curve_from_its_files(saved, tmp_path, capsys):
    """The curve training drew, from the files a bundle keeps (progress.csv, the manifest's training
    config), or a run directory's (progress.csv, config.json); one line when progress.csv is missing."""
    from l3p import cli

    out = tmp_path / "curve.png"
    assert cli.main(["plot", "--bundle", str(ROOT / "models" / "FetchPush-v4"), "--learning-curve",
                     "--out", str(out)]) == 0
    (figure, dpi), = saved
    ax, = figure.axes
    assert ax.get_title() == "FetchPush-v4" and ax.get_xlabel() == "env steps"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["policy π(s, g)", "L3P planner, training settings (d_max 15, local horizon 10)"]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and too_small(figure, dpi) == []

    run = tmp_path / "run"
    run.mkdir()
    (run / "progress.csv").write_text("cycle,optimizer_steps,env_steps,success_policy,success_l3p\n"
                                      "10,1000,0,0.1,\n20,2000,0,0.3,0.4\n")
    (run / "config.json").write_text('{"env_id": "ogbench/pointmaze-large-v0", "dataset": "d.npz"}')
    assert cli.main(["plot", "--bundle", str(run), "--learning-curve", "--out", str(tmp_path / "run.png")]) == 0
    ax, = saved[-1][0].axes
    assert ax.get_xlabel() == "optimizer steps"  # an offline run's x axis
    assert [len(line.get_xdata()) for line in ax.get_lines()] == [2, 1]  # the empty cell is no point
    capsys.readouterr()
    assert cli.main(["plot", "--bundle", str(tmp_path), "--learning-curve"]) != 0
    assert capsys.readouterr().err == (f"l3p plot: error: --learning-curve needs {tmp_path / 'progress.csv'} (a run "
                                       "writes it; export copies it beside the bundle)\n")
