"""The offline replay's windows when recorded episodes differ in length (a controller's segments,
one episode each): ``offline_window_steps`` cuts every episode of at least that many steps into
windows that keep all its transitions and leaves the shorter ones out, counted."""
from __future__ import annotations

import numpy as np
import pytest

from l3p.core.dataset import Dataset
from l3p.training.config import TrainConfig
from l3p.training.offline import episode_windows, short_episodes


def segments(lengths: list[int]) -> Dataset:
    n = sum(lengths)
    steps = np.arange(n, dtype=np.float32)
    terminals = np.zeros(n, np.float32)
    terminals[np.cumsum(lengths) - 1] = 1
    return Dataset(observations=np.stack([steps, -steps], 1), actions=np.stack([steps, steps], 1) / n,
                   terminals=terminals, achieved_goals=np.stack([steps, -steps], 1), metadata={"env_id": "x"})


def transitions(obs: np.ndarray) -> set[tuple[float, float]]:
    """(step, next step) pairs the windows hold: each window's consecutive rows."""
    return {(float(w[t, 0]), float(w[t + 1, 0])) for w in obs for t in range(len(w) - 1)}


def test_windows_of_a_set_length_keep_every_transition_and_leave_short_episodes_out():
    d = segments([80, 80, 40, 2, 39, 45])  # the loop's shape: 80 + 80 + 40 in a robot episode, a 2-step tail
    obs, ag, action = episode_windows(d, 40)
    # 80 steps: windows at 0, 39 and one ending at the end (40..79); 40: one; 45: at 0 and ending at 44
    first = [0, 39, 40, 80, 119, 120, 160, 241, 246]
    assert obs.shape == (len(first), 40, 2) and action.shape == (len(first), 40, 2)
    np.testing.assert_array_equal(obs[:, 0, 0], first)
    np.testing.assert_array_equal(ag, obs)
    within = {(float(t), float(t + 1)) for start, n in ((0, 80), (80, 80), (160, 40), (241, 45))
              for t in range(start, start + n - 1)}
    assert transitions(obs) == within  # every transition of the kept episodes, none across two
    assert short_episodes(d, 40) == {"episodes": 2, "steps": 41}


def test_without_a_set_length_the_shortest_episode_sets_it():
    d = segments([100, 250, 30])
    obs, _, _ = episode_windows(d)
    assert obs.shape == (3 + 8 + 1, 30, 2)  # end to end: 100 -> 3 windows (10 left), 250 -> 8
    assert short_episodes(d, None) == {"episodes": 0, "steps": 0}


def test_the_window_is_checked():
    with pytest.raises(ValueError, match="offline_window_steps must be >= 3"):
        TrainConfig(offline_window_steps=2)
    assert TrainConfig.from_dict({"offline_window_steps": 40}).offline_window_steps == 40


def test_an_offline_run_records_its_windows_and_refuses_a_window_no_episode_fills(tmp_path):
    pytest.importorskip("ogbench")
    from l3p.core.dataset import DatasetError
    from l3p.sim.datasets import dataset_spec, write
    from l3p.training.presets import preset
    from l3p.training.offline import OfflineTrainer

    path = tmp_path / "stitch.npz"
    write(dataset_spec("pointmaze-large-stitch-v0", episodes=6, steps=60), 0, path)
    cfg = preset("ogbench/pointmaze-large-v0").replace(dataset=str(path), hidden=16, layers=2, ae_hidden=16,
                                                       eval_episodes=1, offline_window_steps=25)
    trainer = OfflineTrainer(cfg, tmp_path / "run")
    record = trainer.dataset_record()
    assert record["window_steps"] == 25 and record["replay_windows"] == 6 * 3  # at 0, 24 and ending at 59
    assert record["short_episodes_left_out"] == {"episodes": 0, "steps": 0}
    with pytest.raises(DatasetError, match=r"stitch\.npz: no episode has offline_window_steps \(61\) steps"):
        OfflineTrainer(cfg.replace(offline_window_steps=61), tmp_path / "run2")
