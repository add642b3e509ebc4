"""OGBench's ant recipe: the expert (l3p.training.expert: SAC on GymXYWrapper(online-ant-v0),
checkpointed and resumable, exported as a numpy policy), OGBench's antmazes as goal envs, the
antmaze datasets driven by an expert (l3p.sim.datasets), and the expert's evaluation. Tiny sizes:
the behaviour, not the learning."""
from __future__ import annotations

import json
import tempfile

import gymnasium as gym
import numpy as np
import pytest

from l3p.core.dataset import load_dataset
from l3p.core.errors import L3PError
from l3p.core.mlp_policy import MLPPolicy, PolicyFileError, load_mlp_policy, save_mlp_policy
from l3p.sim import mazes
from l3p.sim.datasets import dataset_spec, generate, steer, write
from l3p.sim.envs import env_spec, goal_adapter, make_env

ogbench = pytest.importorskip("ogbench")


def random_expert(seed: int = 0, hidden: int = 16) -> MLPPolicy:
    rng = np.random.default_rng(seed)
    return MLPPolicy([rng.normal(0, 0.3, (hidden, 29)), rng.normal(0, 0.3, (8, hidden))],
                     [rng.normal(0, 0.1, hidden), np.zeros(8)], {"note": "random, for tests"})


def test_a_policy_file_is_the_mlp_it_was_written_from_and_checks_its_digest(tmp_path):
    policy = random_expert()
    digest = save_mlp_policy(tmp_path / "p.npz", policy)
    loaded = load_mlp_policy(tmp_path / "p.npz")
    assert loaded.digest == digest == policy.digest and (loaded.input_dim, loaded.action_dim) == (29, 8)
    x = np.random.default_rng(1).normal(size=(4, 29)).astype(np.float32)
    expected = np.tanh(np.maximum(x @ policy.weights[0].T + policy.biases[0], 0) @ policy.weights[1].T
                       + policy.biases[1])
    np.testing.assert_allclose(loaded(x), expected, rtol=1e-6)
    assert loaded.metadata["note"] == "random, for tests"
    with np.load(tmp_path / "p.npz") as data:
        arrays = dict(data)
    arrays["b1"] = arrays["b1"] + 1.0
    np.savez(tmp_path / "changed.npz", **arrays)
    with pytest.raises(PolicyFileError, match="do not match the sha256"):
        load_mlp_policy(tmp_path / "changed.npz")


@pytest.mark.parametrize("maze", ["large"])
def test_the_antmaze_is_ogbenchs_env_its_tasks_and_its_success_flag(maze):
    ours = make_env(f"ogbench/antmaze-{maze}-v0")
    theirs = gym.make(f"antmaze-{maze}-v0")
    u = ours.unwrapped
    spec = env_spec(ours)
    assert (spec.obs_dim, spec.goal_dim, spec.action_dim, ours.spec.max_episode_steps) == (29, 2, 8, 1000)
    for task in range(1, 6):
        theirs.reset(seed=task, options={"task_id": task})
        obs, _ = ours.reset(seed=task, options={"task_id": task})
        assert u.task_cells(task) == (tuple(theirs.unwrapped.cur_task_info["init_ij"]),
                                      tuple(theirs.unwrapped.cur_task_info["goal_ij"]))
        np.testing.assert_array_equal(obs["observation"][:2], obs["achieved_goal"])  # x-y first, as OGBench's
        assert u.inner.xy_to_ij(obs["achieved_goal"]) == u.task_cells(task)[0]
    a = ours.reset(seed=7, options={"task_id": 3})[0]
    b = ours.reset(seed=7, options={"task_id": 3})[0]
    np.testing.assert_array_equal(a["observation"], b["observation"])  # a pure function of the seed
    adapter = goal_adapter(ours)  # x, y, z, then the torso's quaternion (w, x, y, z)
    assert adapter.torso_quat_index == 3 and not adapter.fallen(a["observation"])
    on_its_back = a["observation"].copy()
    on_its_back[3:7] = [0.0, 1.0, 0.0, 0.0]  # half a turn about x
    assert adapter.fallen(on_its_back)
    point = make_env(f"ogbench/pointmaze-{maze}-v0")
    assert not goal_adapter(point).can_fall
    point.close()
    centre = np.array(u.inner.ij_to_xy(u.task_cells(3)[1]), np.float64)  # 2 from every wall of its cell
    for offset, success in ((0.3, 1.0), (1.0, 0.0)):  # the ant's tolerance is 0.5 (the point's 1.0)
        ours.reset(seed=7, options={"task_id": 3})
        u.goal = centre
        u.inner.set_goal(goal_xy=centre)
        u.inner.set_xy(centre + np.array([offset, 0.0]))
        assert ours.step(np.zeros(8))[4]["success_now"] == success
    ours.close()
    theirs.close()


def test_the_expert_is_given_the_observation_less_x_y_and_the_oracles_direction():
    env = make_env("ogbench/antmaze-medium-v0")
    obs, _ = env.reset(seed=0, options={"task_id": 1})
    seen = []

    def expert(x):
        seen.append(x)
        return np.full(8, 0.5)

    action = steer(env.unwrapped, obs["observation"], expert)
    np.testing.assert_array_equal(action, np.full(8, 0.5))
    np.testing.assert_array_equal(seen[0][:27], obs["observation"][2:])
    np.testing.assert_allclose(seen[0][27:], env.unwrapped.oracle_direction())
    assert abs(np.linalg.norm(seen[0][27:]) - 1) < 1e-4
    env.close()


def test_an_antmaze_stitch_dataset_follows_the_protocol_and_is_deterministic(tmp_path):
    spec = dataset_spec("antmaze-medium-stitch-v0", episodes=3, steps=30)
    assert (spec.robot, spec.noise, spec.env_id) == ("ant", 0.2, "ogbench/antmaze-medium-v0")
    assert [(dataset_spec(n).episodes, dataset_spec(n).steps) for n in
            ("antmaze-giant-navigate-v0", "antmaze-large-navigate-v0", "antmaze-giant-stitch-v0")] == \
        [(500, 2001), (1000, 1001), (5000, 201)]
    expert = random_expert()
    save_mlp_policy(tmp_path / "expert.npz", expert)
    a = write(spec, 3, tmp_path / "a.npz", expert=expert, expert_path=tmp_path / "expert.npz")
    assert a == write(spec, 3, tmp_path / "b.npz", expert=expert, expert_path=tmp_path / "expert.npz")
    assert a != write(spec, 4, tmp_path / "c.npz", expert=expert, expert_path=tmp_path / "expert.npz")
    d = load_dataset(tmp_path / "a.npz")
    assert d.observations.shape == (90, 29) and d.actions.shape == (90, 8) and d.episode_lengths().tolist() == [30] * 3
    np.testing.assert_array_equal(d.achieved_goals, d.observations[:, :2])
    made_by = d.metadata["made_by"]
    assert made_by["expert"]["sha256"] == expert.digest
    assert made_by["command"].endswith(f"--expert {tmp_path}/expert.npz")
    assert np.abs(d.actions).max() <= 1.0
    # Noise 0.2 around the expert's own action on what it was shown.
    first = d.observations[0]
    env = make_env(spec.env_id)
    env.reset(seed=0)
    env.unwrapped.inner.set_xy(first[:2].astype(np.float64))
    env.unwrapped.goal = d.desired_goals[0].astype(np.float64)
    clean = expert(np.concatenate([first[2:], env.unwrapped.oracle_direction()]))
    assert 0.02 < np.abs(d.actions[0] - clean).mean() < 0.5
    layout = np.asarray(env.unwrapped.inner.maze_map)
    for start, _ in d.episode_bounds():  # every goal exactly 4 cells from its start
        s, g = (env.unwrapped.inner.xy_to_ij(p) for p in (d.observations[start, :2], d.desired_goals[start]))
        assert mazes.bfs_cells(layout, s)[g] == 4
    env.close()
    with pytest.raises(L3PError, match="needs an expert"):
        generate(spec, 0)


def test_a_tiny_expert_run_checkpoints_resumes_and_exports_its_actor(tmp_path, monkeypatch):
    pytest.importorskip("stable_baselines3")
    from l3p.training.expert import ExpertConfig, ExpertError, ExpertRun

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # no SB3 log folder there

    small = dict(out=tmp_path / "run", learning_starts=40, batch_size=16, hidden_sizes=(16, 16), checkpoint_every=60,
                 log_every=30, seed=2, select_episodes_per_task=1, eval_maze="medium")
    run = ExpertRun(ExpertConfig(steps=120, **small))
    run.learn()
    out = tmp_path / "run"
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["steps"] == 120 and sorted(p.name for p in (out / "checkpoint").iterdir()) == [
        "model_000000120.zip", "replay_000000120.pkl", "rng_000000120.pkl", "state.json"]
    rows = (out / "progress.csv").read_text().splitlines()
    assert rows[0].startswith("steps,wall_s,steps_per_s,displacement_z_per_step") and len(rows) == 1 + 4
    provenance = json.loads((out / "provenance.json").read_text())
    policy = load_mlp_policy(out / "policy.npz")
    assert provenance["policy_sha256"] == policy.digest == state["policy_sha256"]
    assert provenance["seed"] == 2 and provenance["env_steps"] == 120 and provenance["code_version"]
    assert provenance["command"].startswith(f"l3p expert --out {out} --steps 120 --seed 2")
    x = np.random.default_rng(0).normal(size=(6, 29))
    np.testing.assert_allclose(policy(x), run.model.predict(x, deterministic=True)[0], atol=1e-5)
    # Each checkpoint's policy is driven by the oracle on validation episodes; a tie keeps the later one.
    selection = [row.split(",") for row in (out / "selection.csv").read_text().splitlines()]
    assert selection[0] == ["steps", "success", "policy_sha256"] and [r[:2] for r in selection[1:]] == [
        ["60", "0.0"], ["120", "0.0"]]
    best = json.loads((out / "best_policy.json").read_text())
    assert best["steps"] == 120 and best["seed_base"] == 1_500_000_000 and best["episodes_per_task"] == 1
    assert best["env_id"] == "ogbench/antmaze-medium-v0"
    assert load_mlp_policy(out / "best_policy.npz").digest == best["policy_sha256"] == policy.digest

    with pytest.raises(ExpertError, match="already holds a run"):
        ExpertRun(ExpertConfig(steps=120, **small))
    with pytest.raises(ExpertError, match="seed"):
        ExpertRun(ExpertConfig(steps=180, resume=True, **{**small, "seed": 3}))
    # The run's own learning settings; how it selects may change.
    resumed = ExpertRun(ExpertConfig(out=out, steps=180, resume=True, select_episodes_per_task=0))
    assert resumed.cfg.hidden_sizes == (16, 16) and resumed.cfg.seed == 2
    assert resumed.steps == 120 and resumed.model.replay_buffer.size() == 120
    updates = resumed.model._n_updates
    np.testing.assert_allclose(load_mlp_policy(out / "policy.npz")(x), resumed.model.predict(x, deterministic=True)[0],
                               atol=1e-5)
    resumed.learn()
    assert resumed.steps == 180 and resumed.model._n_updates == updates + 60
    assert json.loads((out / "checkpoint" / "state.json").read_text())["steps"] == 180
    assert json.loads((out / "provenance.json").read_text())["command"].count("l3p expert") == 2
    assert len((out / "selection.csv").read_text().splitlines()) == 3  # no selection asked: no new row
    assert list((tmp_path / "tmp").glob("SB3-*")) == []


def test_the_expert_evaluation_measures_direction_and_oracle_driven_success():
    from l3p.training.expert_eval import direction_following, oracle_driven

    expert = random_expert()
    direction = direction_following(expert, episodes=1, seed_base=5, max_steps=20)
    assert direction["episodes"] == 1 and direction["mean_episode_length"] <= 20
    assert np.isfinite(direction["displacement_z_per_step"])
    result = oracle_driven(expert, "medium", episodes_per_task=1, seed_base=5, max_steps=5)
    assert result["env_id"] == "ogbench/antmaze-medium-v0" and sorted(result["success_per_task"]) == [1, 2, 3, 4, 5]
    assert result["success"] == 0.0  # five steps reach no goal
