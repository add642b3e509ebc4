"""Training runs end to end: exact resume, export parity, the CLI's errors, real short runs."""
from __future__ import annotations

import csv as csv_module
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from l3p.training.config import TrainConfig
from l3p.training.presets import preset
from l3p.training.export import BundleExistsError, export_bundle, sha256
from l3p.training.run_files import CheckpointError, load_checkpoint
from l3p.training.trainer import ConfigError, Trainer

ROOT = Path(__file__).resolve().parents[1]

# A deliberately tiny FetchReach config: a few seconds per run, every stage (warm-up, updates,
# clusters, planning episodes, evaluation with the planner) exercised. Inline collection: the
# collector process gives the same runs (tests/test_collector.py) and costs a start-up per run.
TINY = dict(n_envs=2, warmup_episodes=2, updates_per_cycle=4, batch_size=32, hidden=32, layers=2,
            ae_hidden=16, n_landmarks=6, gls_sample=60, cluster_batch=20, extra_landmarks=3,
            planning_start_episodes=4, eval_every_cycles=2, eval_episodes=2, checkpoint_every_cycles=2,
            buffer_episodes=50, search="hard", torch_threads=1, collector="inline")


def tiny_cfg(steps_cycles: int, **kw):
    return preset("FetchReach-v4").replace(**{**TINY, **kw}, total_env_steps=steps_cycles * 2 * 50)


def params(trainer: Trainer) -> dict[str, np.ndarray]:
    return {f"{name}.{k}": v.detach().clone().numpy() for name, m in trainer.agent.modules().items()
            for k, v in m.state_dict().items()}


def test_a_goal_radius_pays_the_learner_only_inside_it(tmp_path):
    trainer = Trainer(tiny_cfg(1, collector="inline", goal_radius=0.01), tmp_path)
    goal = np.zeros((3, 3), np.float32)
    achieved = np.array([[0.005, 0, 0], [0.03, 0, 0], [0.2, 0, 0]], np.float32)  # FetchReach's own radius: 0.05
    np.testing.assert_array_equal(trainer.env.compute_reward(achieved, goal), [0, 0, -1])
    np.testing.assert_array_equal(trainer.reward_fn(achieved, goal), [0, -1, -1])
    assert TrainConfig.from_dict(json.loads(trainer.cfg.dumps())).goal_radius == 0.01  # as config.json keeps it


def test_falls_as_failures_need_a_robot_that_can_fall(tmp_path):
    with pytest.raises(ConfigError, match="FetchReach-v4 declares no torso that can fall"):
        Trainer(tiny_cfg(1, fall_is_failure=True), tmp_path)
    assert Trainer(tiny_cfg(1), tmp_path).failed_fn is None


def test_resume_continues_exactly(tmp_path):
    straight = Trainer(tiny_cfg(8), tmp_path / "straight")
    straight.train(show_progress=False)

    first = Trainer(tiny_cfg(4), tmp_path / "split")
    first.train(show_progress=False)
    first_command = first.command
    del first  # an interrupted run: only what is on disk survives
    resumed = Trainer.resume(tmp_path / "split", total_env_steps=8 * 100)
    assert resumed.progress.env_steps == 400 and resumed.replay.episodes_seen == 8
    # Provenance names both legs of the run.
    assert resumed.command == f"{first_command} && l3p train --resume {tmp_path / 'split'} --steps 800"
    resumed.train(show_progress=False)

    a, b = params(straight), params(resumed)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert straight.agent.optimizer_steps == resumed.agent.optimizer_steps > 0
    assert straight.agent.clusters_ready and resumed.agent.clusters_ready
    np.testing.assert_array_equal(straight.replay.obs[:16], resumed.replay.obs[:16])
    assert straight.rng.bit_generator.state == resumed.rng.bit_generator.state
    hist = [r["env_steps"] for r in resumed.progress.history]
    assert hist == [200, 400, 600, 800]
    # Each evaluation kept the weights it measured, across the resume.
    assert sorted(f.name for f in (tmp_path / "split" / "snapshots").iterdir()) == [
        f"{n:010d}.pt" for n in hist]
    last = load_checkpoint(tmp_path / "split" / "snapshots" / f"{800:010d}.pt")
    assert last["progress"]["env_steps"] == 800 and last["progress"]["history"][-1] == resumed.progress.history[-1]
    assert "optimizers" not in last["agent"]  # weights only: a third of a checkpoint's agent
    for name, module in resumed.agent.modules().items():
        for k, v in module.state_dict().items():
            np.testing.assert_array_equal(last["agent"]["modules"][name][k].numpy(), v.numpy(), err_msg=f"{name}.{k}")
    assert (tmp_path / "split" / "learning_curve.png").stat().st_size > 1000
    assert (tmp_path / "split" / "progress.csv").read_text().count("\n") == 5


def test_missing_and_corrupt_checkpoints_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path)
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="unreadable"):
        load_checkpoint(tmp_path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    trainer = Trainer(tiny_cfg(4), tmp_path_factory.mktemp("run"))
    trainer.train(show_progress=False)
    return trainer


@pytest.mark.parametrize("batch", [1, 81])
def test_export_parity(trained, tmp_path, batch):
    bundle = export_bundle(trained.agent, tmp_path / "b", trained.provenance())
    agent, rng = trained.agent, np.random.default_rng(batch)
    obs = (agent.o_norm.mean.numpy() + 3 * agent.o_norm.std.numpy() * rng.standard_normal((batch, 10))).astype(np.float32)
    goal = (agent.g_norm.mean.numpy() + 3 * agent.g_norm.std.numpy() * rng.standard_normal((batch, 3))).astype(np.float32)
    sess = lambda n: ort.InferenceSession(str(bundle / f"{n}.onnx"), providers=["CPUExecutionProvider"])  # noqa: E731
    with torch.no_grad():
        a_t = agent.actor(torch.tensor(obs), torch.tensor(goal)).numpy()
        d_t = agent.critic(torch.tensor(obs), torch.tensor(goal), torch.tensor(a_t)).numpy()
        v_t = agent.value(torch.tensor(goal), torch.tensor(goal[::-1].copy())).numpy()
    (a_o,) = sess("actor").run(None, {"obs": obs, "goal": goal})
    d_o, a_o2 = sess("distance").run(None, {"obs": obs, "goal": goal})
    (v_o,) = sess("value").run(None, {"goal_a": goal, "goal_b": goal[::-1].copy()})
    (lm,) = sess("landmarks").run(None, {})
    assert a_o.shape == (batch, 4) and d_o.shape == (batch,) and v_o.shape == (batch,)
    np.testing.assert_allclose(a_o, a_t, atol=1e-4)
    np.testing.assert_allclose(a_o2, a_t, atol=1e-4)
    np.testing.assert_allclose(d_o, d_t, atol=1e-4)
    np.testing.assert_allclose(v_o, v_t, atol=1e-4)
    np.testing.assert_allclose(lm, agent.landmarks(), atol=1e-6)
    assert lm.shape == (6, 3)


def test_layer_norm_critic_and_value_train_and_export_with_parity(tmp_path):
    """layer_norm: the distance critic and V (not the actor) get a LayerNorm per hidden layer, train,
    and their ONNX files give torch's values."""
    trainer = Trainer(tiny_cfg(2, layer_norm=True), tmp_path / "run")
    trainer.train(show_progress=False)
    agent = trainer.agent
    norms = {name: sum(isinstance(m, torch.nn.LayerNorm) for m in net.modules())
             for name, net in (("actor", agent.actor), ("critic", agent.critic), ("value", agent.value))}
    assert norms == {"actor": 0, "critic": agent.cfg.layers, "value": agent.cfg.layers}
    bundle = export_bundle(agent, tmp_path / "b", trainer.provenance())
    rng = np.random.default_rng(0)
    obs = (agent.o_norm.mean.numpy() + agent.o_norm.std.numpy() * rng.standard_normal((16, 10))).astype(np.float32)
    goal = (agent.g_norm.mean.numpy() + agent.g_norm.std.numpy() * rng.standard_normal((16, 3))).astype(np.float32)
    sess = lambda n: ort.InferenceSession(str(bundle / f"{n}.onnx"), providers=["CPUExecutionProvider"])  # noqa: E731
    with torch.no_grad():
        a_t = agent.actor(torch.tensor(obs), torch.tensor(goal))
        d_t = agent.critic(torch.tensor(obs), torch.tensor(goal), a_t).numpy()
        v_t = agent.value(torch.tensor(goal), torch.tensor(goal[::-1].copy())).numpy()
    d_o, _ = sess("distance").run(None, {"obs": obs, "goal": goal})
    (v_o,) = sess("value").run(None, {"goal_a": goal, "goal_b": goal[::-1].copy()})
    np.testing.assert_allclose(d_o, d_t, atol=1e-4)
    np.testing.assert_allclose(v_o, v_t, atol=1e-4)
    assert not np.allclose(d_t, d_t[0])  # a real function of its inputs


def test_manifest_contract(trained, tmp_path):
    bundle = export_bundle(trained.agent, tmp_path / "b", trained.provenance())
    m = json.loads((bundle / "manifest.json").read_text())
    assert m["format"] == "l3p-bundle" and m["format_version"] == 1 and m["env_id"] == "FetchReach-v4"
    assert m["dims"] == {"obs": 10, "goal": 3, "action": 4} and m["n_landmarks"] == 6
    assert m["gamma"] == 0.98 and m["planner"]["search"] == "hard" and m["planner"]["d_max"] == 15.0
    for name, entry in m["files"].items():
        assert sha256(bundle / entry["path"]) == entry["sha256"], name
    prov = m["provenance"]
    assert prov["env_steps"] == 400 and prov["seed"] == 0 and prov["optimizer_steps"] > 0
    assert prov["config"]["n_landmarks"] == 6 and "policy" in prov["success"] and prov["wall_time_s"] > 0
    with pytest.raises(BundleExistsError, match="--force"):
        export_bundle(trained.agent, bundle, trained.provenance())


def l3p(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l3p.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
                                            "PYTHONPATH": str(ROOT)})


def test_cli_errors_are_one_line(tmp_path):
    r = l3p("train", "--env", "FetchTeleport-v4", cwd=tmp_path)
    assert r.returncode == 2 and "unknown env id 'FetchTeleport-v4'" in r.stderr and "Traceback" not in r.stderr
    r = l3p("export", str(tmp_path / "nowhere"), str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2 and "no checkpoint" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "checkpoint.pt").write_bytes(b"\x00garbage")
    r = l3p("export", str(tmp_path / "bad"), str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 2 and "corrupt" in r.stderr and "Traceback" not in r.stderr
    r = l3p("train", "--env", "FetchReach-v4", "--set", "not_a_field=1", cwd=tmp_path)
    assert r.returncode == 2 and "not_a_field" in r.stderr
    r = l3p("train", "--env", "FetchReach-v4", "--set", "n_envs=four", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, "l3p train: error: --set n_envs: expected an integer, got 'four'\n")


def test_cli_train_push_then_export_and_refuse_existing(tmp_path):
    sets = [f"--set={k}={json.dumps(v)}" for k, v in TINY.items()]
    r = l3p("train", "--env", "FetchPush-v4", "--steps", "400", "--out", "run", "--no-progress", *sets, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "run" / "checkpoint.pt").is_file() and (tmp_path / "run" / "replay.npz").is_file()
    m = json.loads((tmp_path / "run" / "bundle" / "manifest.json").read_text())
    assert m["env_id"] == "FetchPush-v4" and m["dims"]["obs"] == 25 and m["provenance"]["env_steps"] == 400
    assert m["provenance"]["command"].startswith("l3p train --env FetchPush-v4")
    r = l3p("export", "run", "b2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # The digest to pin (l3p serve --bundle-sha256) is the one the server reports.
    from l3p.serving.bundle import load_bundle

    assert f"(sha256 {load_bundle(tmp_path / 'b2').sha256})" in r.stdout
    for plot in ("learning_curve.png", "landmarks.png"):  # next to the bundle, for people
        assert (tmp_path / "b2" / plot).stat().st_size > 1000
    assert json.loads((tmp_path / "b2" / "manifest.json").read_text())["provenance"]["env_steps"] == 400
    r = l3p("export", "run", "b2", cwd=tmp_path)
    assert r.returncode == 2 and "already exists" in r.stderr and "--force" in r.stderr
    r = l3p("export", "run", "b3", "--planner", "local_horizon=25", "--planner", "search=hard", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    m3 = json.loads((tmp_path / "b3" / "manifest.json").read_text())
    assert m3["planner"]["local_horizon"] == 25 and m3["planner"]["search"] == "hard"
    assert m3["provenance"]["planner_overrides"] == {"local_horizon": 25, "search": "hard"}
    r = l3p("export", "run", "b4", "--planner", "d_max=-1", cwd=tmp_path)
    assert r.returncode == 2 and "d_max must be a finite number > 0" in r.stderr
    # GLS landmarks: visited states from the run's replay instead of decoded centroids.
    r = l3p("export", "run", "b5", "--landmarks", "gls", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    m5 = json.loads((tmp_path / "b5" / "manifest.json").read_text())
    assert m5["provenance"]["landmarks"].startswith("GLS") and m5["n_landmarks"] == TINY["n_landmarks"]
    (lm,) = ort.InferenceSession(str(tmp_path / "b5" / "landmarks.onnx")).run(None, {})
    with np.load(tmp_path / "run" / "replay.npz") as replay:
        visited = replay["ag"].reshape(-1, 3)
    assert all(np.any(np.all(visited == row, axis=1)) for row in lm)  # each one an achieved goal
    r = l3p("export", "run", "b7", "--landmarks", "gls", "--n-landmarks", "7", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    m7 = json.loads((tmp_path / "b7" / "manifest.json").read_text())
    assert m7["n_landmarks"] == 7 and "--landmarks gls --n-landmarks 7" in m7["provenance"]["export_command"]
    r = l3p("export", "run", "b8", "--n-landmarks", "7", cwd=tmp_path)
    assert r.returncode == 2 and "goes with --landmarks gls" in r.stderr, r.stderr
    # The graph from the replay's episodes (online, the replay plays the dataset's part): this run's
    # block hardly moved, so no passage joins two landmarks, and the export says so in one line.
    r = l3p("export", "run", "b9", "--landmarks", "gls", "--graph", "data", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == (
        "l3p export: error: --graph data: no supported edge: the data never passes from one landmark to another")
    assert not (tmp_path / "b9").exists()
    # An earlier evaluation's snapshot exports as itself: its steps, its measured success, its weights.
    snapshot = Path("run") / "snapshots" / f"{200:010d}.pt"
    r = l3p("export", str(snapshot), "b6", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    prov6 = json.loads((tmp_path / "b6" / "manifest.json").read_text())["provenance"]
    first_eval = json.loads((tmp_path / "b2" / "manifest.json").read_text())["provenance"]
    assert prov6["env_steps"] == 200 and prov6["source_checkpoint"] == str(snapshot)
    assert prov6["optimizer_steps"] < first_eval["optimizer_steps"]
    assert (tmp_path / "b6" / "learning_curve.png").is_file()  # the run's whole curve: where it was chosen
    assert sha256(tmp_path / "b6" / "actor.onnx") != sha256(tmp_path / "b2" / "actor.onnx")
    r = l3p("train", "--env", "FetchPush-v4", "--out", "run", cwd=tmp_path)
    assert r.returncode == 2 and "--resume" in r.stderr


def test_fetch_reach_preset_reaches_success_with_the_planner(tmp_path):
    """The FetchReach preset (shortened to 6 k steps) solves the task with the planner in the loop."""
    cfg = preset("FetchReach-v4").replace(total_env_steps=6_000, eval_episodes=20)
    trainer = Trainer(cfg, tmp_path)
    trainer.train(show_progress=False)
    last = trainer.progress.history[-1]
    assert trainer.agent.clusters_ready
    assert last["success_l3p"] >= 0.9 and last["success_policy"] >= 0.9


@pytest.mark.parametrize("signame, collector", [("SIGINT", "inline"), ("SIGTERM", "process")])
def test_sigint_checkpoints_and_the_run_resumes(tmp_path, signame, collector):
    """Ctrl-C (or SIGTERM) stops after the current cycle with a checkpoint; --resume continues from it."""
    import signal
    import time

    sets = [f"--set={k}={json.dumps(v)}" for k, v in {**TINY, "collector": collector}.items()]
    cmd = [sys.executable, "-m", "l3p.cli", "train", "--env", "FetchReach-v4", "--steps", "100000", "--out", "run",
           "--no-progress", *sets]
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "run" / "checkpoint.pt").exists():  # training is under way
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        proc.send_signal(getattr(signal, signame))
        _, err = proc.communicate(timeout=300)
    finally:  # a failed or interrupted test must not leave a 100 k-step run behind
        proc.kill()
    assert proc.returncode == 130, err
    assert "checkpoint saved" in err and "l3p train --resume run" in err and "Traceback" not in err
    steps = load_checkpoint(tmp_path / "run")["progress"]["env_steps"]
    assert 0 < steps < 100_000
    resumed = Trainer.resume(tmp_path / "run", total_env_steps=steps + 200)
    assert resumed.progress.env_steps == steps
    resumed.train(show_progress=False)
    assert resumed.progress.env_steps == steps + 200


# --------------------------------------------------------------------------- maze runs, fidelity


def test_a_run_that_ends_before_planning_still_ends_with_a_bundle(tmp_path):
    """The maze preset cut short (warm-up only): a servable bundle, no NaN, no unmeasured cell."""
    r = l3p("train", "--env", "PointMaze_Large-v3", "--steps", "400", "--out", "run", "--no-progress",
            "--set", "n_envs=2", "--set", "eval_episodes=2", "--set", "warmup_episodes=100", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "run" / "bundle" / "manifest.json").read_text())
    prov = m["provenance"]
    assert prov["env_steps"] == 400 and prov["config"]["max_episode_steps"] == 200
    assert set(prov["success"]) == {"policy", "eval_env_id", "eval_episodes", "eval_seed_base", "eval_pairs",
                                    "eval_min_cells", "eval_max_steps"}  # no l3p cell
    assert prov["success"]["eval_env_id"] == "PointMaze_Large-v3"
    assert prov["success"]["eval_pairs"] == "far" and "before planning started" in prov["landmarks"]
    assert prov["success"]["eval_min_cells"] == 10 and prov["success"]["eval_max_steps"] is None  # the env's 800
    assert m["n_landmarks"] == 50 and m["env_id"] == "PointMaze_Large-v3"
    assert (tmp_path / "run" / "bundle" / "landmarks.png").stat().st_size > 10_000  # drawn over the maze
    csv = (tmp_path / "run" / "progress.csv").read_text()
    assert "nan" not in csv.lower() and "success_l3p" not in csv.splitlines()[0]
    from l3p.serving.bundle import load_bundle

    assert load_bundle(tmp_path / "run" / "bundle").n_landmarks == 50  # the server would load it
    # The checkpoint itself has no centroids: export says so and serves replay goals instead (the
    # command the interrupted-run hint prints works).
    r = l3p("export", "run", "early", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "no landmark centroids yet" in r.stderr and "(as --landmarks gls)" in r.stderr
    early = json.loads((tmp_path / "early" / "manifest.json").read_text())
    assert early["n_landmarks"] == 50
    assert early["provenance"]["landmarks"].startswith("GLS: 50 achieved goals of the run's replay or dataset")
    # The learning curve also as TensorBoard scalars, at the env steps of progress.csv's rows.
    from l3p.training.tensorboard import available

    if available():
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
        events.Reload()
        rows = list(csv_module.DictReader(csv.splitlines()))
        assert [(e.step, round(e.value, 6)) for e in events.Scalars("success_policy")] == [
            (int(row["env_steps"]), round(float(row["success_policy"]), 6)) for row in rows]


def test_cluster_batch_refresh_and_cluster_steps_follow_their_own_schedules(tmp_path, monkeypatch):
    import l3p.training.agent as agent_mod

    trainer = Trainer(tiny_cfg(6, planning_start_episodes=2, warmup_episodes=2, updates_per_cycle=10,
                                cluster_refresh_every=5, cluster_every=2), tmp_path)
    agent, planned, cluster_losses = trainer.agent, [], []
    work = agent.cluster_work
    agent.cluster_work = lambda *a: (w := work(*a), planned.append((agent.optimizer_steps + 1, w)))[0]
    real = agent_mod.losses.cluster_loss
    monkeypatch.setattr(agent_mod.losses, "cluster_loss", lambda *a: (cluster_losses.append(1), real(*a))[1])
    trainer.train(show_progress=False)
    refreshes = [n for n, w in planned if w.refresh_goals is not None]
    steps = [n for n, w in planned if w.step]
    # Once the clusters exist (init picks their first batch): a refresh every 5 optimizer steps and a
    # cluster step every 2, each on its own schedule; every planned step ran (in the second thread).
    assert steps and steps == list(range(steps[0], agent.optimizer_steps + 1, 2))
    assert refreshes == list(range(refreshes[0], agent.optimizer_steps + 1, 5)) and refreshes[0] % 5 == 0
    assert abs(refreshes[0] - steps[0]) < 5 and agent.optimizer_steps >= 40
    assert len(cluster_losses) == len(steps)
    assert all(len(w.refresh_goals) == trainer.cfg.gls_sample for n, w in planned if n in refreshes)


def test_the_agent_regresses_v_on_the_next_achieved_goal(trained, monkeypatch):
    import l3p.training.agent as agent_mod

    seen = {}
    real = agent_mod.losses.value_loss

    def spy(value, ag_next, goal, target, failed):
        seen["ag_next"] = ag_next.clone()
        return real(value, ag_next, goal, target, failed)

    monkeypatch.setattr(agent_mod.losses, "value_loss", spy)
    batch = trained.replay.sample(64, np.random.default_rng(0), trained.env.compute_reward)
    assert not np.allclose(batch.ag, batch.ag_next)
    agent = Trainer(tiny_cfg(1), Path("unused")).agent
    agent.update(batch)
    agent.drain()
    np.testing.assert_array_equal(seen["ag_next"].numpy(), batch.ag_next)


def test_action_bounds_other_than_one(tmp_path):
    """A ±2 action box: the actor spans it, the critic and the L2 penalty see a / a_max, export agrees."""
    from l3p.training.agent import L3PAgent
    from l3p.sim.envs import EnvSpec
    from l3p.training.losses import actor_loss

    spec = EnvSpec("FetchReach-v4", 10, 3, 4, (-2.0,) * 4, (2.0,) * 4, 50)
    agent = L3PAgent(tiny_cfg(1), spec)
    with torch.no_grad():
        agent.actor.net[-1].bias.fill_(10.0)  # saturate tanh: the actor's extreme action
    obs, goal = np.zeros((3, 10), np.float32), np.zeros((3, 3), np.float32)
    np.testing.assert_allclose(agent.act(obs, goal), 2.0, atol=1e-4)
    # The penalty is on the scaled action: saturated at ±2 it is exactly action_l2 * 1.
    t_obs, t_goal = torch.tensor(obs), torch.tensor(goal)
    from l3p.training.networks import q_from_distance
    q = q_from_distance(agent.critic(t_obs, t_goal, agent.actor(t_obs, t_goal)), agent.cfg.gamma)
    loss = actor_loss(agent.actor, agent.critic, t_obs, t_goal, agent.cfg.gamma, action_l2=1.0)
    assert loss.item() == pytest.approx((-q.mean() + 1.0).item(), abs=1e-4)
    agent.clusters_ready = True
    bundle = export_bundle(agent, tmp_path / "b", {"command": "test"})
    (a_onnx,) = ort.InferenceSession(str(bundle / "actor.onnx")).run(None, {"obs": obs, "goal": goal})
    np.testing.assert_allclose(a_onnx, 2.0, atol=1e-4)
    assert json.loads((bundle / "manifest.json").read_text())["action_high"] == [2.0] * 4


def test_planned_episode_subgoals_match_between_torch_and_the_onnx_bundle(trained, tmp_path):
    """One planned episode: the same observations through torch callables and through the exported
    bundle (onnxruntime) give the same subgoal sequence, counters and re-plans."""
    from l3p.core import EpisodePlanner
    from l3p.serving.bundle import load_bundle

    agent = trained.agent
    bundle = load_bundle(export_bundle(agent, tmp_path / "b", trained.provenance()))
    np.testing.assert_allclose(bundle.landmarks, agent.landmarks(), atol=1e-6)
    env = trained.eval_env
    obs = env.reset([7] * len(env))
    goal = obs["desired_goal"][0]
    # Sampled subgoals at a high temperature, so the episode visits several landmarks: both planners
    # draw from the same seeded stream and must agree on every pick.
    config = agent.cfg.planner.replace(local_horizon=0.0, d_max=1000.0, sample_subgoal=True, temperature=20.0)
    torch_planner = EpisodePlanner(agent.landmarks(), goal, agent.value_fn, config, seed=1)
    onnx_planner = EpisodePlanner(bundle.landmarks, goal, bundle.value_fn, config, seed=1)
    np.testing.assert_allclose(onnx_planner.landmark_to_goal, torch_planner.landmark_to_goal, atol=1e-3)
    trace = []
    for _ in range(env.spec.max_steps):
        o = obs["observation"][0]
        a = torch_planner.step(o, agent.distance_fn, agent.act)
        b = onnx_planner.step(o, bundle.distance_fn, bundle.policy_fn)
        trace.append((a.subgoal_index, a.replanned, a.counter))
        assert (b.subgoal_index, b.replanned, b.counter) == trace[-1]
        np.testing.assert_allclose(b.action, a.action, atol=1e-4)
        obs, _ = env.step(np.repeat(a.action[None], len(env), axis=0))
    assert sum(r for _, r, _ in trace) >= 3 and len({s for s, _, _ in trace}) >= 2  # it really planned


def test_target_networks_follow_their_schedule(tmp_path):
    """target_update_every=k: one Polyak step every k optimizer steps; None: one per cycle."""
    for every, expected in ((None, 3), (2, 6)):  # 3 cycles of 4 updates after the warm-up cycle
        trainer = Trainer(tiny_cfg(4, updates_per_cycle=4, target_update_every=every,
                                   planning_start_episodes=100), tmp_path / str(every))
        agent, count = trainer.agent, []
        update = agent.update_targets
        agent.update_targets = lambda: (count.append(agent.optimizer_steps), update())[1]
        trainer.train(show_progress=False)
        assert agent.optimizer_steps == 12 and len(count) == expected
        assert count == ([4, 8, 12] if every is None else [2, 4, 6, 8, 10, 12])


def test_landmark_picture_next_to_the_bundle_uses_the_served_d_max(trained, tmp_path, monkeypatch):
    """The picture beside a bundle draws the graph the bundle serves (its d_max after --planner),
    not the training run's."""
    import l3p.training.commands as commands

    drawn = []
    real = commands.plot_landmarks
    monkeypatch.setattr(commands, "plot_landmarks", lambda *a, **kw: (drawn.append(a), real(*a, **kw))[1])
    bundle = export_bundle(trained.agent, tmp_path / "b", trained.provenance(), planner_overrides={"d_max": 7.5})
    commands._add_plots(trained.run_dir, bundle, trained.agent)
    assert trained.cfg.planner.d_max == 15.0 and drawn[0][6] == 7.5 and "served d_max 7.5" in drawn[0][3]
    assert (bundle / "landmarks.png").stat().st_size > 1000 and (bundle / "progress.csv").is_file()


def test_an_online_run_says_once_early_what_the_rest_costs(tmp_path, capsys):
    """Timed over cycles that learn (the warm-up cycle and the first learning one not counted): the
    env steps and cycles left, each cycle's env steps and updates, and the evaluations to come."""
    def estimates(cycles: int = 8, **kw) -> list[str]:
        Trainer(tiny_cfg(cycles, **kw), tmp_path / f"{cycles}-{len(kw)}").train(show_progress=False)
        return [line for line in capsys.readouterr().err.splitlines() if "cost estimate" in line]

    line, = estimates()  # cycle 1 warm-up, 2 skipped, 3-5 timed: said after cycle 5 of 8
    assert re.fullmatch(r"FetchReach-v4: cost estimate: 300 more env steps = 3 cycles \(100 env steps \+ 4 updates "
                        r"each\) at \d+\.\d\d s each on this machine = \d+ s, plus 2 evaluations \(progress.csv's "
                        r"wall_time_s shows what they take\)", line), line
    line, = estimates(planning_start_episodes=14)  # planning starts at cycle 7: said before it
    assert line.endswith("; measured before planning starts (episode 14): planned episodes and landmark updates "
                         "make later cycles slower")
    assert estimates(cycles=5) == []  # too short to be worth one: nothing left once timed


def test_export_of_a_bundle_changes_what_it_serves_and_copies_its_graphs(untrained_bundle, tmp_path):
    """`l3p export BUNDLE OUT --planner ...`: a bundle whose training run is gone, served with other
    defaults: the same graphs byte for byte, the change in the provenance, a corrupt source refused."""
    from l3p.serving.bundle import load_bundle

    r = l3p("export", str(untrained_bundle), "gentle", "--planner", "action_scale=0.8", "--planner", "d_max=7",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    source, copy = load_bundle(untrained_bundle), load_bundle(tmp_path / "gentle")
    assert f"(sha256 {copy.sha256})" in r.stdout and copy.sha256 != source.sha256
    assert copy.planner_defaults == source.planner_defaults.replace(action_scale=0.8, d_max=7.0)
    for name in ("actor", "distance", "value", "landmarks"):
        assert sha256(tmp_path / "gentle" / f"{name}.onnx") == sha256(untrained_bundle / f"{name}.onnx")
    before = json.loads((untrained_bundle / "manifest.json").read_text())
    after = json.loads((tmp_path / "gentle" / "manifest.json").read_text())
    assert {k: v for k, v in after.items() if k not in ("planner", "provenance")} == {
        k: v for k, v in before.items() if k not in ("planner", "provenance")}
    (change,) = after["provenance"].pop("rebundled")
    assert change["from_sha256"] == source.sha256 and change["planner"] == {"action_scale": 0.8, "d_max": 7}
    assert change["command"] == f"l3p export {untrained_bundle} gentle --planner action_scale=0.8 --planner d_max=7"
    assert after["provenance"].pop("planner_overrides") == {"action_scale": 0.8, "d_max": 7}
    assert after["provenance"] == {k: v for k, v in before["provenance"].items() if k != "planner_overrides"}
    # Again, from the copy: the changes add up, each recorded.
    r = l3p("export", "gentle", "gentler", "--planner", "action_scale=0.5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    again = json.loads((tmp_path / "gentler" / "manifest.json").read_text())
    assert (again["planner"]["action_scale"], again["planner"]["d_max"]) == (0.5, 7)
    assert [c["planner"] for c in again["provenance"]["rebundled"]] == [{"action_scale": 0.8, "d_max": 7},
                                                                         {"action_scale": 0.5}]
    # What needs the training run, a bad value, and a source whose graph is not the one its manifest names.
    r = l3p("export", "gentle", "b1", "--graph", "data", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == (
        "l3p export: error: gentle is a bundle: its landmarks and edges are copied as they are (--planner changes "
        "what it serves); --graph goes with a training run")
    r = l3p("export", "gentle", "gentle", "--force", "--planner", "action_scale=0.5", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, "l3p export: error: gentle is the bundle being copied: write the new "
                                           "bundle to another directory\n")
    assert json.loads((tmp_path / "gentle" / "manifest.json").read_text()) == after | {
        "provenance": {**after["provenance"], "rebundled": [change], "planner_overrides": {"action_scale": 0.8,
                                                                                          "d_max": 7}}}
    r = l3p("export", "gentle", "b2", "--planner", "action_scale=0", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, "l3p export: error: --planner: bad value for action_scale: '0' "
                                           "(action_scale must be a finite number > 0, got 0.0)\n")
    r = l3p("export", "gentle", "b2", "--planner", "next_hop=true", "--planner", "follow_edges=true", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, "l3p export: error: bad planner override: next_hop=true makes "
                                           "follow_edges do nothing; drop one\n")
    r = l3p("export", "gentle", "hop", "--planner", "next_hop=true", cwd=tmp_path)  # what it silences is left off
    assert r.returncode == 0, r.stderr
    hop = json.loads((tmp_path / "hop" / "manifest.json").read_text())
    assert hop["planner"]["next_hop"] is True and hop["provenance"]["rebundled"][-1]["same_actions"] is False
    r = l3p("export", "hop", "b2", "--planner", "prune_loops=true", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (2, "l3p export: error: bad planner override: next_hop=true makes prune_loops "
                                           "do nothing; drop one (next_hop=true is a default here: drop prune_loops, "
                                           "or add next_hop=false)\n")
    (tmp_path / "gentle" / "value.onnx").write_bytes(b"not the graph")
    r = l3p("export", "gentle", "b3", "--planner", "action_scale=0.5", cwd=tmp_path)
    assert r.returncode == 2 and "value.onnx" in r.stderr and "sha256" in r.stderr, r.stderr
    assert not any((tmp_path / name).exists() for name in ("b1", "b2", "b3", ".b3.partial"))
