"""Every experiment script of benchmarks/experiments/ on a tiny input (a few episodes of a few dozen steps
of a shipped model, datasets of a few episodes, a training run of 40 updates), run as its command line
runs it, in this process (the imports paid once): the values it prints, the files it writes, and the
trace of the in-process episode helper they share (episodes.py)."""
from __future__ import annotations

import json
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ogbench")

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "benchmarks" / "experiments"
ANT = ROOT / "models" / "antmaze-large-navigate"  # OGBench's antmaze-large, 200 landmarks, a data graph
POINT = ROOT / "models" / "PointMaze_Large-v3"
EXPERT = ROOT / "experts" / "ant-s0" / "policy.npz"
SEED = 1_500_000_000  # the experiments' validation seeds


@pytest.fixture(autouse=True)
def beside_the_scripts(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))  # as `python benchmarks/experiments/X.py` puts them first


def experiment(name: str, *args, capsys) -> tuple[dict, str]:
    """Run ``benchmarks/experiments/NAME.py ARGS...``: (its globals at the end, what it printed); a script
    that ends with sys.exit(0) leaves no globals."""
    argv = sys.argv
    sys.argv = [str(EXPERIMENTS / f"{name}.py"), *map(str, args)]
    try:
        namespace = runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as end:
        if end.code not in (0, None):
            raise
        namespace = {}
    finally:
        sys.argv = argv
    return namespace, capsys.readouterr().out


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


@pytest.fixture(scope="module")
def ant_data(tmp_path_factory) -> Path:
    """3 episodes of 40 steps of antmaze-large, the kept expert walking (as `l3p dataset` makes them)."""
    from l3p.core.mlp_policy import load_mlp_policy
    from l3p.sim.datasets import dataset_spec, write

    path = tmp_path_factory.mktemp("ant") / "antmaze-large-navigate.npz"
    write(dataset_spec("antmaze-large-navigate-v0", episodes=3, steps=40), 0, path, expert=load_mlp_policy(EXPERT),
          expert_path=EXPERT)
    return path


# -- the helper


def test_the_helpers_trace_is_the_planners_steps_and_the_envs(capsys):
    from episodes import load, planner_episode
    from l3p.core import GOAL

    model = load(ANT)
    env = model.env(30)
    (seed, task), = model.episodes(env, 1)
    assert (seed, task) == (SEED, 1)
    episode = planner_episode(model, env, seed, task)
    assert len(episode.steps) == 30 and not episode.success and not episode.fallen  # the env's time limit
    first = episode.steps[0]
    assert first.plan.replanned and first.plan.subgoal_index != GOAL and first.plan.counter >= 1
    for step, after in zip(episode.steps, episode.steps[1:]):
        np.testing.assert_array_equal(step.next_obs, after.obs)
        np.testing.assert_array_equal(step.goal, step.plan.subgoal)
        np.testing.assert_array_equal(step.action, step.plan.action)  # the planner's action, as served
    assert episode.final_distance == pytest.approx(float(np.linalg.norm(episode.steps[-1].next_achieved - episode.goal)))
    # The same episode again: the same actions (the planner is seeded with the env seed).
    again = planner_episode(model, env, seed, task)
    np.testing.assert_array_equal(np.stack([s.action for s in again.steps]), np.stack([s.action for s in episode.steps]))
    # An act hook sends its own action and the planner still plans: a still ant stays where it was.
    still = planner_episode(model, env, seed, task, act=lambda obs, plan: np.zeros_like(plan.action))
    assert all(not s.action.any() for s in still.steps) and still.steps[0].plan.replanned
    moved = np.linalg.norm(still.steps[-1].next_achieved - still.steps[0].achieved)
    assert moved < 0.5 < np.linalg.norm(episode.steps[-1].next_achieved - episode.steps[0].achieved)


# -- the planner's episodes


def test_counter_trace(capsys):
    ns, out = experiment("counter_trace", ANT, 1, "--max-steps", 120, capsys=capsys)
    table = ns["table"]
    assert out.startswith(f"re-plans {len(table)}\n") and len(table) >= 2
    d_pick, counter, closest, m_replan, d_replan, m_pick = table.T
    assert (d_pick > 0).all() and (counter >= 1).all() and np.isfinite(d_replan).all()
    assert (closest <= m_replan + 1e-9).all()  # the closest approach is at most where the re-plan found it
    counters = re.search(r"counter +quartiles \[([^\]]*)\]", out)[1]
    assert numbers(counters) == pytest.approx(np.percentile(counter, [10, 25, 50, 75, 90]).round(2).tolist())


def test_falls_with_the_reflex_and_with_the_expert_driving(capsys):
    ns, out = experiment("falls", ANT, 2, "--max-steps", 40, "--hold-below", 0.9, "--hold-until", 0.95,
                         "--action-scale", 0.8, capsys=capsys)
    assert ns["config"].action_scale == 0.8 and len(ns["path"]) == 80  # neither won nor fell in 40 steps
    assert f"action_scale 0.8, held below 0.9 (to 0.95) {ns['held']} steps: 0 of 2, 0 fell;" in out
    share = float(re.search(r"where (\d+)% of all steps lie", out)[1]) / 100
    from walls import distance_to_walls

    assert share == pytest.approx(np.mean(distance_to_walls(np.array(ns["path"]), ns["env"]) < 1.0), abs=0.005)

    ns, out = experiment("falls", ANT, 1, "--max-steps", 20, "--expert", EXPERT, capsys=capsys)
    assert "(the expert driving)" in out
    from l3p.sim.datasets import follow

    for step in ns["episode"].steps[:2]:  # a re-plan step (the first) and a step that keeps the subgoal
        way = step.plan.subgoal[:2] - step.obs[:2]
        np.testing.assert_allclose(step.action, follow(ns["expert"], step.obs, way / np.linalg.norm(way)), rtol=1e-6)


def test_pace(capsys):
    ns, out = experiment("pace", ANT, 1, "--max-steps", 60, capsys=capsys)
    r = ns["r"]
    assert f"1 episodes (60 steps): speed {r[:, 1].mean():.3f} m a step, toward the subgoal {r[:, 2].mean():.3f}" in out
    shares = [float(s) for s in re.findall(r"away: (\d+)% of steps", out)]
    assert 95 <= sum(shares) <= 105 and (r[:, 2] <= r[:, 1] + 1e-9).all()  # progress toward it <= the speed


def test_planner_trials(capsys):
    ns, out = experiment("planner_trials", ANT, 2, "action_scale=0.9", "--max-steps", 30, capsys=capsys)
    assert ns["config"].action_scale == 0.9
    lines = out.splitlines()
    assert [line.split()[:4] for line in lines[:2]] == [[str(SEED), "1", "False", "29"], [str(SEED + 1), "2", "False", "29"]]
    assert lines[1].endswith(f"final {ns['episode'].final_distance:.1f} z={ns['last'].next_obs[2]:.2f}")
    assert lines[2] == "wins 0 of 2"


def test_planner_variants_served_sight_and_the_retired(capsys):
    ns, out = experiment("planner_variants", ANT, 1, "served", "action_scale=0.9", "--max-steps", 30, capsys=capsys)
    assert out == f"served {{'action_scale': 0.9}}: 0 of 1, {ns['path'] / 30:.3f} m per step\n"

    ns, out = experiment("planner_variants", ANT, 1, "sight", "--margin", 0.3, "--max-steps", 10, capsys=capsys)
    kept, served = ns["model"].edges, ns["model"].bundle.edges
    assert out.startswith(f"edges clear of the walls by 0.3 m: {int(kept.sum())} of {int(served.sum())}\n")
    assert 0 < kept.sum() < served.sum() and not (kept & ~served).any()
    assert "sight {'margin': 0.3}: 0 of 1," in out

    for variant in ("farthest", "successor", "past", "counter"):
        with pytest.raises(SystemExit, match=f"variant '{variant}': retired"):
            experiment("planner_variants", ANT, 1, variant, capsys=capsys)


def test_replans(capsys):
    ns, out = experiment("replans", ANT, SEED + 92, 3, 0.8, "--max-steps", 60, capsys=capsys)
    episode = ns["episode"]
    lines = out.splitlines()
    assert lines[0] == f"goal {episode.goal.round(1)}" and lines[-1].startswith("end 59 False ")
    replans = [t for t, step in enumerate(episode.steps) if step.plan.replanned]
    assert [int(line.split()[0]) for line in lines[1:-1]] == replans and replans[0] == 0
    counters = [int(re.search(r"counter (\d+)", line)[1]) for line in lines[1:-1]]
    assert counters == [episode.steps[t].plan.counter for t in replans]


def test_loop_validation_trace(capsys):
    """The point maze's far pair, its whole 1,000 steps (success counted at the last step)."""
    ns, out = experiment("loop_validation_trace", POINT, 1, capsys=capsys)
    episode = ns["episode"]
    assert len(episode.steps) == 1000 and episode.success  # this pair is reached in about 530 steps
    shown = dict(re.findall(r"(\w+)=(\S+)", out.splitlines()[0]))
    first_in, inside = int(shown["first_in"]), int(shown["steps_inside"])
    assert first_in == ns["inside"][0] and inside == len(ns["inside"]) and 0 < inside <= 1000 - first_in
    final, closest = float(shown["final"]), float(shown["min"])
    assert closest <= final <= 0.45 and final == pytest.approx(episode.final_distance, abs=0.005)
    assert out.splitlines()[1] == "wins 1 reached 1 of 1"


# -- the actor alone, the graph, the data


def test_route_ceiling_follows_the_oracles_cells_or_their_landmarks(capsys):
    ns, out = experiment("route_ceiling", ANT, 1, "--max-steps", 30, capsys=capsys)
    landmarks, inner = ns["landmarks"], ns["maze"].inner
    goals = [step.goal for step in ns["episode"].steps]
    assert all(np.allclose(g, inner.ij_to_xy(inner.xy_to_ij(g))) for g in goals)  # cell centres ...
    assert not any((landmarks == g).all(axis=1).any() for g in goals)  # ... not landmarks
    assert out.splitlines()[0] == f"{SEED} 1 failure 30 steps "
    assert f"0 of 1, per task {{1: 0}}, fallen at the end 0, {ns['path'] / 30:.3f} m per step" in out

    ns, out = experiment("route_ceiling", ANT, 1, "--snap", "--max-steps", 30, capsys=capsys)
    assert all((ns["landmarks"] == step.goal).all(axis=1).any() for step in ns["episode"].steps)
    assert "(snapped to landmarks)" in out


def test_route_order(capsys):
    ns, out = experiment("route_order", ANT, 4, capsys=capsys)
    correlation = float(re.search(r"rank correlation of d_cg and BFS cells: (\S+)", out)[1])
    assert correlation > 0.9  # the shipped model's route follows the maze's
    per_cell = [int(n) for n in re.findall(r"n= *(\d+)", out)]
    assert sum(per_cell) == int(ns["ok"].sum()) and len(per_cell) == len(set(ns["cells"][ns["ok"]]))


def test_local_reach(ant_data, capsys):
    ns, out = experiment("local_reach", ANT, ant_data, 10, 3, capsys=capsys)
    reached, missed, steps = ns["reached"], ns["missed"], ns["steps"]
    assert reached + len(missed) == 3 and all(1 <= s <= 30 for s in steps)
    assert f"goals 10 data steps ahead: reached {reached} of 3" in out and f"flipped over {ns['flipped']}" in out


def test_distance_check(ant_data, capsys):
    ns, out = experiment("distance_check", ANT, ant_data, capsys=capsys)
    offsets = [int(k) for k in re.findall(r"offset +(\d+):", out)]
    assert offsets == [5, 15, 30]  # those shorter than the 40-step episodes
    medians = [float(d) for d in re.findall(r": D +(\S+) \[", out)]
    assert medians == sorted(medians)  # D grows with the offset along recorded episodes
    pairs = [int(n) for n in re.findall(r"n=(\d+)", out)]
    assert 0 < sum(pairs) <= 400


def test_data_flips_counts_the_episodes_that_flip_and_their_steps(ant_data, tmp_path, capsys):
    from l3p.core.dataset import load_dataset, save_dataset

    ds = load_dataset(ant_data)
    obs = ds.observations.copy()
    obs[:, 3:7] = [1, 0, 0, 0]  # the torso upright throughout ...
    obs[40 + 10:80, 3:7] = [0, 1, 0, 0]  # ... but on its back in the second episode from its 11th step
    flipped = tmp_path / "flipped.npz"
    save_dataset(flipped, observations=obs, actions=ds.actions, terminals=ds.terminals,
                 achieved_goals=ds.achieved_goals, env_id=ds.metadata["env_id"], made_by={"test": "flipped"})
    _, out = experiment("data_flips", ant_data, flipped, capsys=capsys)
    assert out.splitlines() == [
        f"{ant_data}: 3 episodes of 40 steps; 0 (0.0%) flip, at step - (median); 0.0% of steps flipped",
        f"{flipped}: 3 episodes of 40 steps; 1 (33.3%) flip, at step 10 (median); 25.0% of steps flipped"]


def test_landmark_density_exports_its_landmarks(tmp_path, capsys):
    from l3p.sim.datasets import dataset_spec, write
    from l3p.training.offline import OfflineTrainer
    from l3p.training.presets import preset

    data = tmp_path / "stitch.npz"
    write(dataset_spec("pointmaze-large-stitch-v0", episodes=20, steps=60), 0, data)
    tiny = dict(updates_per_cycle=20, batch_size=64, hidden=32, layers=2, ae_hidden=16, n_landmarks=8, gls_sample=50,
                cluster_batch=20, landmarks_after_updates=20, eval_every_cycles=100, checkpoint_every_cycles=100,
                torch_threads=1)
    cfg = preset("ogbench/pointmaze-large-v0").replace(**tiny, dataset=str(data), offline_updates=40)
    OfflineTrainer(cfg, tmp_path / "run").train(show_progress=False)
    capsys.readouterr()
    ns, out = experiment("landmark_density", tmp_path / "run", tmp_path / "bundle", "snap", 1.0, capsys=capsys)
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["provenance"]["landmarks"] == "landmark_density.py snap 1.0"
    from l3p.serving.bundle import load_bundle

    np.testing.assert_array_equal(load_bundle(tmp_path / "bundle").landmarks, ns["nodes"])
    assert manifest["planner"]["d_max"] == ns["graph"].d_max
    assert len(manifest["edges"]["supported"]) == int(ns["graph"].supported.sum())
    assert out.startswith(f"{tmp_path / 'run'} snap 1.0: d_max {ns['graph'].d_max}, "
                          f"{len(manifest['edges']['supported'])} edges; wall gap median {np.median(ns['gap']):.2f} m")
    sample = ns["sample"]  # snapped: every landmark is one of the sampled goals
    assert all((sample == node).all(axis=1).any() for node in ns["nodes"])

    ns, out = experiment("landmark_density", tmp_path / "run", tmp_path / "trimmed", "trim", 0.5, capsys=capsys)
    assert len(ns["sample"]) == pytest.approx(0.5 * 10 * cfg.gls_sample, abs=1)  # the densest half of the sample
    assert json.loads((tmp_path / "trimmed" / "manifest.json").read_text())["provenance"]["landmarks"] == \
        "landmark_density.py trim 0.5"


def test_validate(capsys):
    _, out = experiment("validate", EXPERT, "--maze", "medium", "--episodes-per-task", 1, "--max-steps", 5,
                        capsys=capsys)
    path, result = out.split(" ", 1)
    assert path == str(EXPERT)
    assert json.loads(result) == {"success_per_task": {str(task): 0.0 for task in range(1, 6)}, "success": 0.0}


def test_hop_ratio(tmp_path, capsys):
    out_file = tmp_path / "hops.json"
    _, out = experiment("hop_ratio", "--bundle", ANT, "--episodes", 2, "--pairs", "tasks", "--out", out_file,
                        capsys=capsys)
    result = json.loads(out_file.read_text())
    assert [(row["seed"], row["task"]) for row in result["episodes"]] == [(SEED, 1), (SEED + 1, 2)]
    ratios = [row["ratio"] for row in result["episodes"]]
    assert all(0 < r < 0.5 and row["hops"] > 2 for r, row in zip(ratios, result["episodes"]))  # many hops in the maze
    assert result["ratio"]["max"] == max(ratios) and f"hop ratio median {np.median(ratios):.3f}" in out


def test_arm_trace_names_the_objects_each_subgoal_asks_to_change(tmp_path, capsys):
    from l3p.cli import main
    from l3p.sim.play_datasets import play_spec, write
    from l3p.training.offline import OfflineTrainer
    from l3p.training.presets import preset

    data = tmp_path / "cube.npz"
    write(play_spec("cube-double-play-v0", episodes=4, steps=60, val_episodes=1), 0, data, workers=1)
    tiny = dict(updates_per_cycle=20, batch_size=64, hidden=32, layers=2, ae_hidden=16, n_landmarks=8, gls_sample=50,
                cluster_batch=20, landmarks_after_updates=20, eval_every_cycles=100, checkpoint_every_cycles=100,
                torch_threads=1)
    cfg = preset("ogbench/cube-double-v0", offline=True).replace(**tiny, dataset=str(data), offline_updates=40)
    OfflineTrainer(cfg, tmp_path / "run").train(show_progress=False)
    assert main(["export", str(tmp_path / "run"), str(tmp_path / "bundle")]) == 0
    capsys.readouterr()
    ns, out = experiment("arm_trace", tmp_path / "bundle", 2, "--max-steps", 30, capsys=capsys)
    lines = out.splitlines()
    assert lines[0].startswith(f"seed {SEED} task 1: ") and lines[2].startswith(f"seed {SEED + 1} task 2: ")
    for line in lines[1:4:2]:  # each pick: its node, its step, the objects it asks to change (cube0, cube1) or -
        assert all(re.fullmatch(r"(goal|L\d+)@\d+:(-|cube[01](\+cube[01])?)(\(missed\))?", pick) for pick in line.split())
    assert lines[4] == f"{ns['successes']}/2 reached"
    assert sum(ns["asked"].values()) == sum(len(line.split()) for line in lines[1:4:2])
    assert all(ns["reached"][n] <= ns["asked"][n] for n in ns["asked"])


HELPERS = {"episodes", "walls"}  # imported by the scripts, run through them


def test_every_experiment_script_is_run_here():
    tested = set(re.findall(r'experiment\("(\w+)"', Path(__file__).read_text()))
    scripts = {p.stem for p in EXPERIMENTS.glob("*.py")} - HELPERS
    assert scripts <= tested, f"no tiny run in tests/test_experiments.py for {sorted(scripts - tested)}"


def test_an_experiment_runs_as_a_script_from_anywhere(tmp_path):
    proc = subprocess.run([sys.executable, str(EXPERIMENTS / "route_order.py"), str(ANT), "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("task 1: steps per BFS cell")
