"""Offline L3P end to end: a small regenerated OGBench dataset -> offline training (in-sample critic,
behaviour-regularized actor, exact resume) -> the same bundle format -> served beside an online
model by the same server, episodes in the OGBench env through gRPC."""
from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from l3p.core import EpisodePlanner
from l3p.core.dataset import load_dataset
from l3p.sim.datasets import dataset_spec, write
from l3p.sim.envs import make_env, task_options
from l3p.training import losses
from l3p.training.presets import preset
from l3p.training.export import export_bundle
from l3p.training.networks import q_from_distance
from l3p.training.offline import OfflineTrainer, episode_windows
from l3p.training.run_files import CheckpointError, load_checkpoint

pytest.importorskip("ogbench")

ROOT = Path(__file__).resolve().parents[1]

TINY = dict(updates_per_cycle=20, batch_size=64, hidden=32, layers=2, ae_hidden=16, n_landmarks=8, gls_sample=100,
            cluster_batch=20, landmarks_after_updates=20, eval_every_cycles=2, eval_episodes=2,
            checkpoint_every_cycles=2, torch_threads=1, eval_max_steps=40)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "stitch.npz"
    write(dataset_spec("pointmaze-large-stitch-v0", episodes=40, steps=60), 0, path)
    return path


def tiny_cfg(dataset, updates: int, **kw):
    return preset("ogbench/pointmaze-large-v0").replace(**{**TINY, **kw}, dataset=str(dataset), offline_updates=updates)


def params(trainer) -> dict[str, np.ndarray]:
    return {f"{name}.{k}": v.detach().clone().numpy() for name, m in trainer.agent.modules().items()
            for k, v in m.state_dict().items()}


def test_the_dataset_becomes_the_replay(dataset, tmp_path):
    trainer = OfflineTrainer(tiny_cfg(dataset, 40), tmp_path)
    d = load_dataset(dataset)
    assert trainer.replay.size == 40 and trainer.replay.horizon == 59 and trainer.progress.env_steps == 0
    np.testing.assert_array_equal(trainer.replay.obs[3], d.observations[180:240])
    np.testing.assert_array_equal(trainer.replay.goal[3], d.achieved_goals[239])  # the trajectory's end
    np.testing.assert_array_equal(trainer.replay.action[3], d.actions[180:239])
    rng = np.random.default_rng(0)
    b = trainer.replay.sample(4000, rng, trainer.reward_fn, 0.5, 200, in_sample=True, random_goal_p=0.3)
    # The critic's next action is the recorded one: found at the next step of the same episode.
    rows = {tuple(o): k for k, o in enumerate(d.observations.tolist())}
    for i in range(50):
        k = rows[tuple(b.obs[i].tolist())]
        np.testing.assert_array_equal(b.action[i], d.actions[k])
        np.testing.assert_array_equal(b.action_next[i], d.actions[k + 1])
    random = b.bc_mask == 0
    assert 0.25 < random.mean() < 0.35  # random_goal_p of all goals
    # Paid by the env's own reward function: the dataset's env is one the project makes (no held-out split).
    assert trainer.held_out is None
    np.testing.assert_array_equal(b.reward, trainer.eval_env.compute_reward(b.ag_next, b.goal))
    assert b.actor_goal is None


def test_actor_goal_steps_gives_the_actor_near_goals_of_its_own_recording(dataset, tmp_path):
    trainer = OfflineTrainer(tiny_cfg(dataset, 40, actor_goal_steps=5), tmp_path)
    d = load_dataset(dataset)
    b = trainer.replay.sample(4000, np.random.default_rng(0), trainer.reward_fn, 0.5, 200, in_sample=True,
                              random_goal_p=0.3, actor_goal_steps=5)
    rows = {tuple(o): k for k, o in enumerate(d.observations.tolist())}
    ahead = []
    for i in range(300):
        k = rows[tuple(b.obs[i].tolist())]
        episode_end = 60 * (k // 60 + 1)
        later = [j - k for j in range(k + 1, min(k + 6, episode_end)) if (d.achieved_goals[j] == b.actor_goal[i]).all()]
        assert later, f"sample {i}: the actor's goal is not 1..5 steps ahead in its recording"
        ahead.append(later[0])
    assert set(ahead) == {1, 2, 3, 4, 5}
    assert (b.bc_mask == 1).all()  # every actor goal lies on its own trajectory: the behaviour term everywhere
    assert 0.25 < (np.linalg.norm(b.goal - b.ag, axis=1) > 5).mean()  # the critic keeps its far and random goals
    # The learner's actor loss is the behaviour-regularized one on the actor's goals.
    agent, cfg = trainer.agent, trainer.cfg
    t = {k: torch.as_tensor(v) for k, v in vars(b).items() if v is not None}
    expected = losses.offline_actor_loss(agent.actor, agent.critic, t["obs"], t["actor_goal"], t["action"], t["bc_mask"],
                                         cfg.gamma, cfg.bc_alpha)
    torch.testing.assert_close(agent._actor_loss(t), expected)
    with pytest.raises(ValueError, match="actor_goal_steps must be >= 1 or null, got 0"):
        preset("ogbench/pointmaze-large-v0").replace(actor_goal_steps=0)


def test_episodes_of_different_lengths_are_cut_into_equal_windows(dataset):
    d = load_dataset(dataset)
    d.terminals[:] = 0
    d.terminals[[99, 349, 2399]] = 1  # episodes of 100, 250 and 2050 steps
    obs, ag, action = episode_windows(d)
    assert obs.shape == (1 + 2 + 20, 100, 2) and action.shape == (23, 100, 2)  # the 250's last 50 left out
    np.testing.assert_array_equal(obs[2], d.observations[200:300])
    np.testing.assert_array_equal(obs[3], d.observations[350:450])


def test_the_offline_critic_bootstraps_only_through_recorded_actions():
    torch.manual_seed(0)
    from l3p.training.normalizer import Normalizer
    from l3p.training.networks import DistanceCritic

    norm = Normalizer(2), Normalizer(2)
    critic, target = DistanceCritic(*norm, 2, 2, 2, 1.0, hidden=16, layers=2), DistanceCritic(*norm, 2, 2, 2, 1.0, 16, 2)
    obs, goal, action, obs_next, action_next = (torch.randn(64, 2) for _ in range(5))
    reward, failed = -torch.ones(64), torch.zeros(64)
    loss = losses.offline_critic_loss(critic, target, obs, goal, action, reward, obs_next, action_next, failed,
                                      0.99, 100.0, 0.9)
    with torch.no_grad():
        y = torch.clamp(reward + 0.99 * q_from_distance(target(obs_next, goal, action_next), 0.99), -100, 0)
        diff = y - q_from_distance(critic(obs, goal, action), 0.99)
        expected = (torch.where(diff < 0, 0.1, 0.9) * diff ** 2).mean()
    torch.testing.assert_close(loss, expected)
    other = losses.offline_critic_loss(critic, target, obs, goal, action, reward, obs_next, -action_next, failed,
                                       0.99, 100.0, 0.9)
    assert not torch.isclose(loss, other)  # the target moves with the recorded next action, nothing else


def test_resume_continues_exactly_and_checks_the_dataset(dataset, tmp_path):
    straight = OfflineTrainer(tiny_cfg(dataset, 80), tmp_path / "straight")
    straight.train(show_progress=False)
    first = OfflineTrainer(tiny_cfg(dataset, 40), tmp_path / "split")
    first.train(show_progress=False)
    del first
    resumed = OfflineTrainer.resume(tmp_path / "split", offline_updates=80)
    resumed.train(show_progress=False)
    a, b = params(straight), params(resumed)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert straight.agent.clusters_ready and straight.agent.optimizer_steps == resumed.agent.optimizer_steps == 80
    assert [r["optimizer_steps"] for r in resumed.progress.history] == [40, 80]
    assert sorted(f.name for f in (tmp_path / "split" / "snapshots").iterdir()) == ["0000000040.pt", "0000000080.pt"]
    assert not (tmp_path / "split" / "replay.npz").exists()  # the dataset is the replay
    assert load_checkpoint(tmp_path / "split")["dataset"]["sha256"] == load_dataset(dataset).metadata["sha256"]
    # A changed dataset cannot continue the run.
    changed = tmp_path / "changed.npz"
    write(dataset_spec("pointmaze-large-stitch-v0", episodes=40, steps=60), 1, changed)
    shutil.copy(changed, dataset.with_name("backup.npz"))
    state = json.loads((tmp_path / "split" / "config.json").read_text())
    assert state["dataset"] == str(dataset)
    original = dataset.read_bytes()
    dataset.write_bytes(changed.read_bytes())
    try:
        with pytest.raises(CheckpointError, match="changed since the run started"):
            OfflineTrainer.resume(tmp_path / "split", offline_updates=120)
    finally:
        dataset.write_bytes(original)


def test_a_line_every_log_interval_and_a_cost_estimate_and_the_run_learns_the_same(dataset, tmp_path, capsys):
    """Reporting changes nothing learned: the same weights with lines every 40 updates and none."""
    every = dict(eval_every_cycles=100, checkpoint_every_cycles=100)  # one evaluation, at the end
    quiet = OfflineTrainer(tiny_cfg(dataset, 320, log_every_updates=0, **every), tmp_path / "quiet")
    quiet.train(show_progress=False)
    quiet_lines = capsys.readouterr().err.splitlines()  # what the replay holds, then the estimate: a line each
    assert len(quiet_lines) == 2 and "learning from 40 windows of 60 steps" in quiet_lines[0]
    assert "cost estimate" in quiet_lines[1]
    assert not (tmp_path / "quiet" / "losses.jsonl").exists()
    told = OfflineTrainer(tiny_cfg(dataset, 320, log_every_updates=40, **every), tmp_path / "told")
    told.train(show_progress=False)  # no bar: as in a log file or a pipe
    a, b = params(quiet), params(told)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    lines = capsys.readouterr().err.splitlines()
    env = "ogbench/pointmaze-large-v0"
    logged = [re.fullmatch(rf"{env}: (\d+) optimizer steps of 320  critic \S+  actor \S+  value \S+  ae \S+"
                           rf"(  clusters \S+)?  \(\d+\.\d updates/s\)", line) for line in lines]
    assert [int(m[1]) for m in logged if m] == list(range(40, 321, 40)), lines
    estimate = [line for line in lines if "cost estimate" in line]
    assert len(estimate) == 1 and re.fullmatch(rf"{env}: cost estimate: 20 more updates at \d+\.\d ms each on "
                                               r"this machine = \d+ s, plus 1 evaluation \(.*\)", estimate[0])
    rows = [json.loads(line) for line in (tmp_path / "told" / "losses.jsonl").read_text().splitlines()]
    assert [r["optimizer_steps"] for r in rows] == list(range(40, 321, 40))
    assert all(r["env_steps"] == 0 and np.isfinite(r["loss_critic"]) for r in rows)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "told" / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss_critic")] == list(range(40, 321, 40))


def export_of(provenance: dict) -> dict:
    """The export keys a bundle was made with: recorded (provenance.export), or, in exports made
    before they were recorded, its export command's flags."""
    if "export" in provenance:
        return provenance["export"]
    words = shlex.split(provenance["export_command"])
    flag = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
    return {"landmarks": flag.get("--landmarks", "centroids"), "n_landmarks": int(flag["--n-landmarks"]),
            "graph": flag.get("--graph", "all")}


@pytest.mark.parametrize("recipe,model", [
    ("ogbench-offline", "pointmaze-large-stitch"),
    ("ogbench-offline", "pointmaze-giant-stitch"),
    ("ogbench-antmaze-offline", "antmaze-large-navigate"),
    ("ogbench-antmaze-offline", "antmaze-giant-stitch")])
def test_the_recipe_file_makes_the_shipped_offline_model_and_its_other_seeds(recipe, model):
    """configs/<recipe>.toml with a model's dataset is the card's recipe: every training seed's config
    (the served one and seeds/<seed>/) is the file's, seed and the dataset file's location aside, every
    seed learned from one dataset of the model's name, and each bundle was exported by the file's
    export keys."""
    import argparse

    from l3p.core.bundle_format import read_manifest
    from l3p.training.commands import add_train_arguments, train_config
    from l3p.training.config import EXPORT_KEYS, TrainConfig

    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    robot, maze, _ = model.split("-")
    cfg = train_config(parser.parse_args(["--config", str(ROOT / "configs" / f"{recipe}.toml"),
                                          "--env", f"ogbench/{robot}-{maze}-v0",
                                          "--set", f"dataset=data/{model}-v0.npz"]))
    model_dir = ROOT / "models" / model
    manifests = [read_manifest(model_dir)] + [json.loads(p.read_text())
                                              for p in sorted(model_dir.glob("seeds/*/manifest.json"))]
    assert len(manifests) >= 3
    for manifest in manifests:
        prov = manifest["provenance"]
        trained = TrainConfig.from_dict(prov["config"])
        # Runs made before the export keys existed carry them as their export command's flags.
        assert cfg.replace(seed=trained.seed, dataset=trained.dataset,
                           **{k: getattr(trained, k) for k in EXPORT_KEYS}) == trained
        assert prov["dataset"]["made_by"]["name"] == f"{model}-v0"
        assert prov["optimizer_steps"] == cfg.offline_updates
        assert export_of(prov) == {"landmarks": cfg.export_landmarks, "n_landmarks": cfg.export_n_landmarks,
                                   "graph": cfg.export_graph}
    assert sorted(m["provenance"]["seed"] for m in manifests) == list(range(len(manifests)))
    assert len({m["provenance"]["dataset"]["sha256"] for m in manifests}) == 1


def test_exporting_before_the_clusters_start_says_when_they_do(dataset, tmp_path, capsys):
    import argparse

    from l3p.training.commands import add_export_arguments, run_export

    OfflineTrainer(tiny_cfg(dataset, 20, landmarks_after_updates=1000), tmp_path / "run").train(show_progress=False)
    capsys.readouterr()  # the training's lines; the export's follow
    parser = argparse.ArgumentParser()
    add_export_arguments(parser)
    assert run_export(parser.parse_args([str(tmp_path / "run"), str(tmp_path / "bundle")])) == 0
    err = capsys.readouterr().err
    assert "no landmark centroids yet (clusters start after 1000 optimizer steps): exporting GLS-spread dataset " \
           "goals instead (as --landmarks gls)" in err and "episodes" not in err


def test_an_offline_and_an_online_model_serve_and_answer_alike(dataset, untrained_bundle, tmp_path):
    from l3p.clients.client import PlannerClient
    from l3p.serving.bundle import load_bundle
    from l3p.serving.local_server import LocalServer

    trainer = OfflineTrainer(tiny_cfg(dataset, 60), tmp_path / "run")
    trainer.train(show_progress=False)
    models = tmp_path / "models"
    export_bundle(trainer.agent, models / "maze-offline", trainer.provenance())
    shutil.copytree(untrained_bundle, models / "reach-online")
    manifest = json.loads((models / "maze-offline" / "manifest.json").read_text())
    assert manifest["env_id"] == "ogbench/pointmaze-large-v0" and manifest["dims"] == {"obs": 2, "goal": 2, "action": 2}
    prov = manifest["provenance"]
    assert prov["env_steps"] == 0 and prov["optimizer_steps"] == 60
    assert prov["dataset"]["sha256"] == load_dataset(dataset).metadata["sha256"]
    assert prov["dataset"]["made_by"]["command"].startswith("l3p dataset pointmaze-large-stitch-v0 --seed 0")

    env = make_env("ogbench/pointmaze-large-v0")
    reach = make_env("FetchReach-v4")
    with LocalServer(models=models) as server, PlannerClient(server.target) as client:
        for name, episode_env, options in (("maze-offline", env, task_options(env, 2)), ("reach-online", reach, None)):
            bundle = load_bundle(models / name)
            obs, _ = episode_env.reset(seed=11, options=options)
            planner = EpisodePlanner(bundle.landmarks, obs["desired_goal"].astype(np.float32), bundle.value_fn,
                                     bundle.planner_defaults, seed=4)
            with PlannerClient(server.target, model=name).episode(obs["desired_goal"], seed=4) as ep:
                for _ in range(25):
                    step = ep.act(obs["observation"])
                    local = planner.step(obs["observation"].astype(np.float32), bundle.distance_fn,
                                         bundle.policy_fn)
                    np.testing.assert_allclose(step.action, local.action, rtol=0, atol=1e-6, err_msg=name)
                    assert (step.subgoal_index, step.replanned, step.counter) == (
                        local.subgoal_index, local.replanned, local.counter)
                    assert np.all(np.abs(step.action) <= 1.0)
                    obs = episode_env.step(np.asarray(step.action))[0]
        assert {m.info.model for m in client.list_models().models} == {"maze-offline", "reach-online"}

        # OGBench's protocol through gRPC: episode i on task i mod 5 + 1, a row per task; or one task.
        from l3p.clients.evaluate import evaluate, format_table

        maze = PlannerClient(server.target, model="maze-offline")
        info = maze.model_info()
        report = evaluate(maze, info, info.env_id, modes=("l3p", "policy"), episodes=6, seed=2_000_000_000,
                          progress=False, pairs="tasks", max_steps=20)
        for mode in ("l3p", "policy"):
            m = report["modes"][mode]
            assert [e["task"] for e in m["per_episode"]] == [1, 2, 3, 4, 5, 1]
            assert {t: r["episodes"] for t, r in m["tasks"].items()} == {"1": 2, "2": 1, "3": 1, "4": 1, "5": 1}
            assert sum(r["successes"] for r in m["tasks"].values()) == m["successes"]
        assert report["pairs"] == "tasks" and "per task:" in format_table(report)
        one = evaluate(maze, info, info.env_id, modes=("policy",), episodes=3, seed=7, progress=False,
                       pairs="tasks", max_steps=5, task=4)
        assert one["task"] == 4 and [e["task"] for e in one["modes"]["policy"]["per_episode"]] == [4, 4, 4]
        maze.close()
    env.close()
    reach.close()


def test_the_data_graph_recipe_exports_supported_edges_and_serves_them_as_in_process(dataset, tmp_path):
    """`l3p export --graph data`: the manifest carries the edges the dataset passes along, d_max and
    the planner options follow from them (recorded in the provenance), and the server's unary and
    stream episodes give the in-process planner's actions over that graph, step for step."""
    import argparse

    from l3p.clients.client import PlannerClient
    from l3p.core import LandmarkGraph
    from l3p.core.bundle_format import supported_edges
    from l3p.serving.bundle import load_bundle
    from l3p.serving.local_server import LocalServer
    from l3p.training.commands import add_export_arguments, run_export
    from l3p.training.edges import D_MAX_MARGIN, LOCAL_CUT, data_graph

    OfflineTrainer(tiny_cfg(dataset, 60), tmp_path / "run").train(show_progress=False)
    parser = argparse.ArgumentParser()
    add_export_arguments(parser)
    bundle_dir = tmp_path / "models" / "maze"
    assert run_export(parser.parse_args([str(tmp_path / "run"), str(bundle_dir), "--landmarks", "gls",
                                         "--n-landmarks", "12", "--graph", "data"])) == 0
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    graph = manifest["provenance"]["graph"]
    assert graph["edges"] == "data-supported" and graph["supported_edges"] == len(manifest["edges"]["supported"])
    assert manifest["planner"]["d_max"] == pytest.approx(round(D_MAX_MARGIN * graph["d_connect"], 2))
    assert manifest["planner"]["local_cut"] == LOCAL_CUT
    assert manifest["planner"]["follow_edges"] is True and manifest["planner"]["prune_loops"] is True
    assert "--graph data" in manifest["provenance"]["export_command"]
    bundle = load_bundle(bundle_dir)
    data = load_dataset(dataset)
    recomputed = data_graph(bundle.landmarks, data.achieved_goals, data.episode_bounds(), bundle.value_fn)
    np.testing.assert_array_equal(supported_edges(manifest), bundle.edges)
    assert 0 < bundle.edges.sum() < 12 * 11
    # The ONNX value graph matches torch within float rounding: the same support up to edges at the ratio.
    assert (recomputed.supported != bundle.edges).sum() <= 2
    # Pictures draw the served graph: no edge the data does not support.
    from l3p.plot import landmark_edges

    drawn = np.isfinite(landmark_edges(bundle, bundle.planner_defaults)) & ~np.eye(12, dtype=bool)
    assert drawn.any() and not (drawn & ~bundle.edges).any()

    env = make_env("ogbench/pointmaze-large-v0")
    graph_in_process = LandmarkGraph(bundle.landmarks, bundle.value_fn, edges=bundle.edges)
    with LocalServer(models=tmp_path / "models") as server:
        client = PlannerClient(server.target, model="maze")
        for open_episode in (client.episode, client.stream_episode):
            obs, _ = env.reset(seed=5, options=task_options(env, 3))
            goal = obs["desired_goal"].astype(np.float32)
            local = EpisodePlanner(graph_in_process, goal, bundle.value_fn, bundle.planner_defaults, seed=2)
            with open_episode(obs["desired_goal"], seed=2) as ep:
                for _ in range(60):
                    step = ep.act(obs["observation"])
                    mine = local.step(obs["observation"].astype(np.float32), bundle.distance_fn, bundle.policy_fn)
                    np.testing.assert_allclose(step.action, mine.action, rtol=0, atol=1e-6)
                    assert (step.subgoal_index, step.replanned, step.counter) == (
                        mine.subgoal_index, mine.replanned, mine.counter)
                    obs = env.step(np.asarray(step.action))[0]
        info = client.model_info()
        assert info.defaults["follow_edges"] is True and info.defaults["local_cut"] == LOCAL_CUT


def test_an_actor_with_near_goals_is_served_a_d_max_within_its_reach(dataset, tmp_path):
    """Offline with actor_goal_steps k, the export reads the actor's reach off the dataset (V across
    recorded steps k apart) and caps d_max by it, never below the cut that joins the landmarks."""
    import argparse

    from l3p.serving.bundle import load_bundle
    from l3p.training.commands import add_export_arguments, run_export
    from l3p.training.edges import D_MAX_MARGIN, actor_reach

    OfflineTrainer(tiny_cfg(dataset, 60, actor_goal_steps=5), tmp_path / "run").train(show_progress=False)
    parser = argparse.ArgumentParser()
    add_export_arguments(parser)
    bundle_dir = tmp_path / "bundle"
    assert run_export(parser.parse_args([str(tmp_path / "run"), str(bundle_dir), "--landmarks", "gls",
                                         "--n-landmarks", "12", "--graph", "data"])) == 0
    manifest = json.loads((bundle_dir / "manifest.json").read_text())
    graph = manifest["provenance"]["graph"]
    data = load_dataset(dataset)
    reach = actor_reach(data.achieved_goals, data.episode_bounds(), load_bundle(bundle_dir).value_fn, 5)
    assert graph["reach_steps"] == 5 and graph["reach"] == pytest.approx(reach, abs=0.02)
    expected = max(min(D_MAX_MARGIN * graph["d_connect"], graph["reach"]), graph["d_connect"])
    assert manifest["planner"]["d_max"] == pytest.approx(expected, abs=0.011)
    assert manifest["planner"]["d_max"] >= graph["d_connect"]


def test_the_config_carries_the_export_recipe_to_the_runs_bundle_and_to_export(dataset, tmp_path):
    """export_landmarks / export_n_landmarks / export_graph in the training config: the bundle the run
    writes at its end is exported by them, `l3p export` of a snapshot takes them as its defaults (the
    same graph), and its flags override them."""
    import argparse

    from l3p.core.bundle_format import supported_edges
    from l3p.serving.bundle import load_bundle
    from l3p.training.commands import add_export_arguments, add_train_arguments, run_export, run_train

    cfg = tiny_cfg(dataset, 60, export_landmarks="centred", export_n_landmarks=12, export_graph="data")
    config = tmp_path / "recipe.json"
    config.write_text(json.dumps(cfg.to_dict()))
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    assert run_train(parser.parse_args(["--config", str(config), "--out", str(tmp_path / "run"), "--no-progress"])) == 0
    at_end = json.loads((tmp_path / "run" / "bundle" / "manifest.json").read_text())
    assert at_end["provenance"]["export"] == {"landmarks": "centred", "n_landmarks": 12, "graph": "data"}
    assert "then centred" in at_end["provenance"]["landmarks"]
    recorded = np.asarray(load_dataset(dataset).achieved_goals, np.float32)
    for landmark in load_bundle(tmp_path / "run" / "bundle").landmarks:  # each a recorded goal
        assert (recorded == landmark).all(axis=1).any()
    assert at_end["provenance"]["graph"]["edges"] == "data-supported" and at_end["planner"]["follow_edges"] is True

    parser = argparse.ArgumentParser()
    add_export_arguments(parser)
    snapshot = sorted((tmp_path / "run" / "snapshots").iterdir())[-1]
    assert run_export(parser.parse_args([str(snapshot), str(tmp_path / "by-config")])) == 0
    by_config = json.loads((tmp_path / "by-config" / "manifest.json").read_text())
    assert by_config["provenance"]["export"] == at_end["provenance"]["export"]
    np.testing.assert_array_equal(load_bundle(tmp_path / "by-config").landmarks,
                                  load_bundle(tmp_path / "run" / "bundle").landmarks)
    np.testing.assert_array_equal(supported_edges(by_config), supported_edges(at_end))
    assert by_config["planner"] == at_end["planner"]

    assert run_export(parser.parse_args([str(snapshot), str(tmp_path / "all"), "--graph", "all",
                                         "--landmarks", "centroids"])) == 0
    overridden = json.loads((tmp_path / "all" / "manifest.json").read_text())
    assert overridden["provenance"]["export"] == {"landmarks": "centroids", "n_landmarks": 8, "graph": "all"}
    assert "edges" not in overridden and "graph" not in overridden["provenance"]


def test_export_settings_that_do_not_go_together_are_refused_by_name(dataset):
    with pytest.raises(ValueError, match="export_n_landmarks .* goes with export_landmarks 'gls' or 'centred'"):
        tiny_cfg(dataset, 20, export_n_landmarks=12)
    with pytest.raises(ValueError, match="export_graph must be one of all, data, got 'dat'.*data"):
        tiny_cfg(dataset, 20, export_graph="dat")
