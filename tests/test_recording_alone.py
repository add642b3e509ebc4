"""A robot team with recordings and no simulator (training/held_out.py): `l3p train --dataset` on a
recording whose env id names no env trains with the dataset's dimensions and bounds, a success
radius from its mapping, and a held-out split of the recording measured at every evaluation; the
run exports, is carded and served (a real server answers Act) without an env."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from l3p import cli
from l3p.clients.client import PlannerClient
from l3p.core.dataset import Dataset, DatasetError, load_dataset, save_dataset
from l3p.core.names import HELD_OUT_MEASURES
from l3p.training import held_out
from l3p.training.config import TrainConfig
from l3p.training.presets import RECORDINGS_RECIPE
from server_proc import serve

ENV_ID = "team/base-1"  # no env of this name exists
TINY = ["hidden=32", "layers=2", "ae_hidden=16", "n_landmarks=8", "batch_size=64", "updates_per_cycle=100",
        "eval_every_cycles=1", "landmarks_after_updates=100", "gls_sample=100", "cluster_batch=20",
        "export_n_landmarks=10", "offline_window_steps=20", "torch_threads=1"]


def recording(path: Path, env_id: str = ENV_ID, episodes: int = 30) -> Path:
    """A base driven to a new target every 20 steps with noisy commands: position observed, the
    position is the achieved goal; every sixth episode is 10 steps, shorter than the window."""
    rng = np.random.default_rng(0)
    obs, actions, ends = [], [], []
    for e in range(episodes):
        p, steps = rng.uniform(-1, 1, 2), 10 if e % 6 == 5 else 40
        for t in range(steps):
            if t % 20 == 0:
                target = rng.uniform(-1, 1, 2)
            a = np.clip(3 * (target - p) + rng.normal(0, 0.3, 2), -1, 1)
            obs.append(p.copy()), actions.append(a), ends.append(t == steps - 1)
            p = p + 0.05 * a
    obs = np.asarray(obs, np.float32)
    save_dataset(path, observations=obs, actions=np.asarray(actions, np.float32), terminals=np.asarray(ends),
                 achieved_goals=obs, env_id=env_id, made_by={"robot": "base-1"})
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One tiny run from a mapping (format npz, success_radius 0.05) of the recording."""
    work = tmp_path_factory.mktemp("recording")
    recording(work / "rec.npz")
    (work / "base.yaml").write_text("format: npz\npaths: [rec.npz]\nsuccess_radius: 0.05\n")
    torch.set_num_threads(1)
    args = ["train", "--dataset", str(work / "base.yaml"), "--out", str(work / "run"), "--steps", "300",
            "--no-progress", *(f"--set={s}" for s in TINY)]
    return work, args


def test_a_recording_alone_trains_and_says_what_it_keeps_and_measures(run, capsys):
    work, args = run
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert (f"{ENV_ID}: training from the recording alone, the project cannot make {ENV_ID}" in err
            and "success within 0.05 of the goal (success_radius), 3 of 30 episodes held out (held_out_fraction)" in err)
    # 27 training episodes, of which the 10-step ones (every sixth) are shorter than the 20-step window
    assert "cut from 23 of 27 episodes; 4 episodes (40 steps) shorter than the window are left out" in err
    assert "(offline_window_steps)" in err
    assert f"{ENV_ID}: 300 optimizer steps: held out: D off by" in err and "graph joined" in err
    with open(work / "run" / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and not any(k.startswith("success_") for k in rows[0])
    assert set(HELD_OUT_MEASURES) - {"graph_joined"} <= set(rows[0]) and rows[-1]["graph_joined"]
    assert -1 <= float(rows[-1]["held_out_distance_rank"]) <= 1
    assert list((work / "run" / "tensorboard").iterdir())
    config = json.loads((work / "run" / "config.json").read_text())
    assert (config["offline_eval"], config["success_radius"]) == ("held_out", 0.05)
    manifest = json.loads((work / "run" / "bundle" / "manifest.json").read_text())
    data = load_dataset(work / "rec.npz")
    assert manifest["env_id"] == ENV_ID and manifest["dims"] == {"obs": 2, "goal": 2, "action": 2}
    np.testing.assert_allclose(manifest["action_low"], data.actions.min(axis=0), rtol=1e-6)
    provenance = manifest["provenance"]
    assert "success" not in provenance and set(provenance["held_out"]) == set(HELD_OUT_MEASURES)
    assert provenance["dataset"]["held_out"]["episodes"] == 3


def test_the_run_exports_is_carded_and_served_without_an_env(run, capsys):
    work, _ = run
    bundle = work / "exported"
    assert cli.main(["export", str(work / "run"), str(bundle)]) == 0
    assert cli.main(["card", str(bundle)]) == 0
    card = (bundle / "README.md").read_text()
    assert "Trained from a recording alone: no env was made" in card and "## Held-out recording" in card
    assert "| `held_out_action_error` |" in card and "l3p run" not in card
    with serve(bundle) as port, PlannerClient(f"127.0.0.1:{port}", timeout_s=10) as client:
        assert client.model_info().env_id == ENV_ID
        with client.episode(np.array([0.5, 0.5], np.float32), seed=1) as episode:
            for _ in range(3):
                step = episode.act(np.array([0.0, 0.1], np.float32))
                assert step.action.shape == (2,) and np.all(np.abs(step.action) <= 1.0 + 1e-6)


def test_without_a_success_radius_the_run_is_refused_naming_it(tmp_path, capsys):
    data = recording(tmp_path / "rec.npz")
    assert cli.main(["train", "--dataset", str(data), "--out", str(tmp_path / "run"), "--no-progress"]) == DatasetError.exit_code
    err = capsys.readouterr().err
    assert "rec.npz: training without an env (the project cannot make team/base-1" in err
    assert err.strip().endswith("needs a success radius: success_radius in the mapping, or --set success_radius=R "
                                "(goal units)")


def test_an_offline_run_on_an_online_preset_takes_the_recordings_recipe(tmp_path, capsys):
    """PointMaze_Large-v3's online preset relabels 85 % with random goals 20 %: over 1 offline, once refused."""
    data = recording(tmp_path / "rec.npz", env_id="PointMaze_Large-v3", episodes=4)
    assert cli.main(["train", "--dataset", str(data), "--show-config"]) == 0
    shown = capsys.readouterr().out
    for key, value in RECORDINGS_RECIPE.items():
        assert f"\n{key} = {json.dumps(value)}  (" in shown, key


def test_a_mapping_that_says_no_simulator_trains_without_the_env_it_names():
    data = Dataset(np.zeros((4, 2), np.float32), np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1], np.float32),
                   np.zeros((4, 2), np.float32), {"env_id": "PointMaze_Large-v3",
                                                  "made_by": {"mapping": {"simulator": False, "success_radius": 0.1}}})
    cfg, why = held_out.resolve(TrainConfig(env_id="PointMaze_Large-v3", dataset="x.npz"), data)
    assert (cfg.offline_eval, cfg.success_radius, why) == ("held_out", 0.1, "its mapping says simulator: false")


def test_the_held_out_measures_of_a_perfect_agent():
    """A point moving +0.1 a step: D = distance / 0.1 is exact, the recorded action +1 is the actor's."""
    steps = 30
    obs = np.tile((0.1 * np.arange(steps, dtype=np.float32))[:, None], (4, 1))
    data = Dataset(obs, np.ones_like(obs), np.tile(np.eye(1, steps, steps - 1, dtype=np.float32)[0], 4), obs.copy(),
                   {"env_id": ENV_ID})
    training, held = held_out.split(data, 0.25, seed=0)
    assert (len(training.episode_bounds()), len(held.episode_bounds())) == (3, 1)

    class Perfect:
        def distance_fn(self, o, g):
            return np.abs(g - o).sum(axis=1) / 0.1, None

        def act(self, o, g):
            return np.ones_like(o)

    row = held_out.HeldOut(held, training, max_offset=20, action_max=1.0).measure(Perfect(), None)
    assert row["held_out_distance_error"] == pytest.approx(0, abs=1e-3)
    assert row["held_out_distance_rank"] == pytest.approx(1.0, abs=0.01) and row["held_out_action_error"] == 0
