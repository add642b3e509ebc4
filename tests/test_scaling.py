"""Training that scales: old checkpoints resume unchanged, N rollout workers give one run per seed and
N, bounded staleness is recorded, and the learner moves between devices (CUDA parts skip here
without a GPU, with the reason)."""
from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from l3p.training.agent import ClusterWork, L3PAgent
from l3p.training.arguments import add_train_arguments
from l3p.training.commands import train_config
from l3p.training.config import TrainConfig
from l3p.training.presets import preset
from l3p.training.device import GRAPH_WARMUP_STEPS, DeviceError
from l3p.training.export import export_bundle
from l3p.training.run_files import CHECKPOINT, CheckpointError
from l3p.training.trainer import Trainer
from test_training_run import params, tiny_cfg

OLD_RUN = Path(__file__).parent / "data" / "old_run"
# Written by the trainer before devices and workers existed (tiny FetchReach, 4 cycles, inline, no
# overlap); beside it, that trainer's weights and replay after it resumed the run to 6 cycles.
OLD_RUN_RESUMED = OLD_RUN.parent / "old_run_resumed.npz"
NEEDS_CUDA = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason=f"no CUDA device (torch {torch.__version__}, CUDA build: {torch.version.cuda})")


def test_an_old_checkpoint_resumes_to_the_previous_trainers_run(tmp_path):
    """The same weights and episodes as the previous trainer's resume: bit for bit on the machine
    that wrote the expectation, within float rounding elsewhere (other CPUs take other kernels)."""
    run = shutil.copytree(OLD_RUN, tmp_path / "run")
    resumed = Trainer.resume(run, total_env_steps=6 * 100)
    assert resumed.cfg.device == "cpu" and resumed.cfg.collectors == 1  # defaults for keys it never had
    resumed.train(show_progress=False)
    expected = np.load(OLD_RUN_RESUMED)
    assert resumed.agent.optimizer_steps == int(expected["optimizer_steps"]) == 20
    got = {f"param/{k}": v for k, v in params(resumed).items()}
    got.update({f"replay/{name}": getattr(resumed.replay, name) for name in ("obs", "ag", "goal", "action")})
    assert sorted(got) == sorted(k for k in expected.files if k != "optimizer_steps")
    for key, value in got.items():
        np.testing.assert_allclose(value, expected[key], rtol=1e-4, atol=1e-5, err_msg=key)


def test_n_workers_give_one_run_per_seed_and_n(tmp_path):
    """Two runs with two worker processes each: the same episodes, in the same order, and the same
    weights; each cycle stores all n_envs episodes (one per worker here)."""
    runs = []
    for name in ("a", "b"):
        trainer = Trainer(tiny_cfg(4, collector="process", collectors=2), tmp_path / name)
        trainer.train(show_progress=False)
        runs.append(trainer)
    a, b = runs
    assert a.replay.episodes_seen == 4 * 2 and a.progress.env_steps == 4 * 2 * 50
    for name in ("obs", "ag", "goal", "action"):
        np.testing.assert_array_equal(getattr(a.replay, name), getattr(b.replay, name), err_msg=name)
    pa, pb = params(a), params(b)
    for k in pa:
        np.testing.assert_array_equal(pa[k], pb[k], err_msg=k)
    assert max(r["planned_fraction"] for r in a.progress.history) > 0
    # The two workers' envs were seeded apart: their episodes have different goals.
    assert not np.array_equal(a.replay.goal[0], a.replay.goal[1])


def test_bounded_staleness_is_recorded_and_loses_no_episode(tmp_path):
    cfg = tiny_cfg(6, collector="process", collectors=2, max_staleness=1, eval_every_cycles=1)
    trainer = Trainer(cfg, tmp_path)
    trainer.train(show_progress=False)
    p = trainer.progress
    assert p.env_steps >= cfg.total_env_steps
    assert trainer.replay.episodes_seen * 50 == p.env_steps  # what was counted was stored
    rows = list(csv.DictReader((tmp_path / "progress.csv").read_text().splitlines()))
    assert all(0.0 <= float(r["staleness"]) <= 1.0 for r in rows)


def test_a_checkpoint_with_capturable_optimizers_resumes_on_the_cpu(tmp_path):
    """A CUDA-graph run saves capturable Adam groups; a CPU learner (where capturable is refused)
    resumes from them and goes on."""
    Trainer(tiny_cfg(4), tmp_path).train(show_progress=False)
    state = torch.load(tmp_path / CHECKPOINT, weights_only=True)
    for opt in state["agent"]["optimizers"].values():
        for group in opt["param_groups"]:
            group["capturable"] = True
    torch.save(state, tmp_path / CHECKPOINT)
    resumed = Trainer.resume(tmp_path, total_env_steps=6 * 100)
    resumed.train(show_progress=False)
    assert resumed.agent.optimizer_steps == 20
    assert not any(g["capturable"] for o in resumed.agent.optimizers().values() for g in o.param_groups)


def test_resume_may_change_where_a_run_runs_not_what_it_learns(tmp_path):
    Trainer(tiny_cfg(2), tmp_path).train(show_progress=False)
    with pytest.raises(CheckpointError, match="only device.*not batch_size"):
        Trainer.resume(tmp_path, placement={"batch_size": 64, "device": "cpu"})
    resumed = Trainer.resume(tmp_path, total_env_steps=3 * 100, placement={"collector": "process", "collectors": 2})
    resumed.train(show_progress=False)
    assert resumed.replay.episodes_seen == 3 * 2
    assert "--set collectors=2" in resumed.command


def train_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    return parser.parse_args(list(argv))


def test_updates_per_env_step_sets_each_cycles_updates_and_its_fraction_survives_a_resume(tmp_path):
    """1.3 updates per cycle of 100 env steps (2 envs x 50): 1, 1, 1, 2 over the four learning cycles
    after the warm-up one; stopped after two, the owed 0.6 update is in the checkpoint."""
    cfg = tiny_cfg(5, updates_per_env_step=0.013, checkpoint_every_cycles=100)
    first = Trainer(cfg, tmp_path)
    first.train(show_progress=False, until_env_steps=3 * 100)
    assert first.agent.optimizer_steps == 2 and first.progress.update_credit == pytest.approx(0.6)
    resumed = Trainer.resume(tmp_path)
    assert resumed.progress.update_credit == pytest.approx(0.6)
    resumed.train(show_progress=False)
    assert resumed.agent.optimizer_steps == 5 and resumed.progress.update_credit == pytest.approx(0.2)


def test_the_update_ratio_is_checked_and_set_from_the_command_line():
    assert train_config(train_args("--env", "FetchPush-v4", "--set",
                                   "updates_per_env_step=0.05")).updates_per_env_step == 0.05
    with pytest.raises(ValueError, match="updates_per_env_step must be > 0 or null, got 0"):
        TrainConfig(updates_per_env_step=0)
    with pytest.raises(ValueError, match="an offline run \\(dataset\\) collects none: its budget is offline_updates"):
        TrainConfig(updates_per_env_step=0.1, dataset="data.npz", relabel_p=0.5)


def test_the_gpu_preset_option_puts_the_learner_on_cuda_with_four_times_the_batch():
    push = preset("FetchPush-v4")
    gpu = train_config(train_args("--env", "FetchPush-v4", "--preset-option", "gpu"))
    assert (gpu.device, gpu.batch_size) == ("cuda", 4 * push.batch_size) == ("cuda", 4096)
    assert gpu.replace(device=push.device, batch_size=push.batch_size) == push  # nothing else changes
    # --config and --set apply after it.
    again = train_config(train_args("--env", "FetchPush-v4", "--preset-option", "gpu", "--set", "batch_size=2048",
                                    "--set", 'device="auto"'))
    assert (again.device, again.batch_size) == ("auto", 2048)
    assert preset("ogbench/pointmaze-large-v0", ["gpu"]).batch_size == 4 * 512
    with pytest.raises(ValueError, match="unknown preset option 'gpus'; the options are: gpu \\(did you mean 'gpu'"):
        preset("FetchPush-v4", ["gpus"])
    with pytest.raises(SystemExit):
        train_args("--env", "FetchPush-v4", "--preset-option", "fast")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_one_is_a_clear_error(tmp_path):
    with pytest.raises(DeviceError, match="sees no CUDA device.*device=cpu or auto"):
        Trainer(tiny_cfg(1, device="cuda"), tmp_path)
    assert Trainer(tiny_cfg(1, device="auto"), tmp_path).agent.device.type == "cpu"


# ----- on a GPU ----------------------------------------------------------------------------------

@NEEDS_CUDA
def test_the_cuda_graph_step_matches_the_eager_step(tmp_path):
    """Same seed, same batches: the graph replay (after its eager warm-up steps) and the eager
    GPU step end with the same weights, and the graph was captured."""
    trainer = Trainer(tiny_cfg(2), tmp_path)
    trainer.train(show_progress=False, until_env_steps=100)  # a replay to sample from
    agents = {}
    for graph in (True, False):
        torch.manual_seed(0)
        agents[graph] = L3PAgent(trainer.cfg.replace(device="cuda", cuda_graph=graph), trainer.spec)
        agents[graph].load_state_dict(trainer.agent.state_dict())
    for step in range(8):
        batch = trainer.replay.sample(32, np.random.default_rng(step), trainer.env.compute_reward)
        for agent in agents.values():
            agent.update(batch)
    rows = {g: a.drain() for g, a in agents.items()}
    assert agents[True].capture_status()["update"] == "captured"
    np.testing.assert_allclose([r["loss_critic"] for r in rows[True]], [r["loss_critic"] for r in rows[False]],
                               rtol=1e-4)
    for (k, a), b in zip(agents[True].actor.state_dict().items(), agents[False].actor.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=k)


@NEEDS_CUDA
def test_the_captured_cluster_refresh_and_elbo_step_match_the_eager_ones(tmp_path):
    """With the clusters on and a GLS refresh and an ELBO step at every step (so each of the three
    graphs is captured and then replayed): the same losses, clusters, cluster batch and weights as
    the eager GPU step on the same batches, refresh goals and start indices."""
    trainer = Trainer(tiny_cfg(2), tmp_path)
    trainer.train(show_progress=False, until_env_steps=100)
    rng = np.random.default_rng(0)
    trainer.agent.init_clusters(trainer.replay.sample_goals(trainer.cfg.gls_sample, rng), rng)
    agents = {}
    for graph in (True, False):
        agents[graph] = L3PAgent(trainer.cfg.replace(device="cuda", cuda_graph=graph), trainer.spec)
        agents[graph].load_state_dict(trainer.agent.state_dict())
    for step in range(GRAPH_WARMUP_STEPS + 4):
        batch = trainer.replay.sample(32, np.random.default_rng(step), trainer.env.compute_reward)
        work = ClusterWork(refresh_goals=trainer.replay.sample_goals(trainer.cfg.gls_sample, rng),
                           refresh_first=int(rng.integers(trainer.cfg.gls_sample)), step=True)
        for agent in agents.values():
            agent.update(batch, work)
    rows = {g: a.drain() for g, a in agents.items()}
    assert agents[True].capture_status() == {"update": "captured", "refresh": "captured", "clusters": "captured"}
    for key in ("loss_critic", "loss_ae", "loss_clusters"):
        np.testing.assert_allclose([r[key] for r in rows[True]], [r[key] for r in rows[False]], rtol=1e-4, err_msg=key)
    torch.testing.assert_close(agents[True].cluster_batch, agents[False].cluster_batch, rtol=1e-4, atol=1e-5)
    for name in ("clusters", "ae", "actor"):
        for (k, a), b in zip(agents[True].modules()[name].state_dict().items(),
                             agents[False].modules()[name].state_dict().values()):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=f"{name}.{k}")


@NEEDS_CUDA
def test_a_cuda_run_resumes_on_the_cpu_and_back_and_exports_the_same_bundle_format(tmp_path):
    Trainer(tiny_cfg(2, device="cuda"), tmp_path).train(show_progress=False)
    on_cpu = Trainer.resume(tmp_path, total_env_steps=4 * 100, placement={"device": "cpu"})
    on_cpu.train(show_progress=False)
    back = Trainer.resume(tmp_path, total_env_steps=6 * 100, placement={"device": "cuda"})
    assert back.agent.device.type == "cuda"
    back.train(show_progress=False)
    assert back.agent.optimizer_steps == 20
    cpu_files = {p.name for p in export_bundle(on_cpu.agent, tmp_path / "cpu_bundle", on_cpu.provenance()).iterdir()}
    gpu_files = {p.name for p in export_bundle(back.agent, tmp_path / "gpu_bundle", back.provenance()).iterdir()}
    assert cpu_files == gpu_files


def test_ray_workers_without_ray_installed_are_a_one_line_error(tmp_path):
    """``collector=ray`` where the optional extra is missing (Ray hidden from the import system)."""
    hide_ray = "import sys; sys.modules['ray'] = None; from l3p.cli import main; sys.exit(main(sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", hide_ray, "train", "--env", "FetchReach-v4", "--out", "run",
                        "--steps", "200", "--no-progress", "--set", "collector=\"ray\"", "--set", "collectors=2"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    from l3p.core.names import install_hint

    assert f"collector 'ray' needs the 'ray' extra (missing module 'ray'): {install_hint('ray')}" in r.stderr
    assert not (tmp_path / "run").exists()  # refused before anything was built


def test_a_ray_address_without_ray_workers_is_refused(tmp_path):
    r = subprocess.run([sys.executable, "-m", "l3p", "train", "--env", "FetchReach-v4", "--out", "run", "--steps", "200",
                        "--no-progress", "--ray-address", "auto"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "l3p train: error: --ray-address needs --set collector=ray (this run's collector is 'process')" in r.stderr
    assert not (tmp_path / "run").exists()
