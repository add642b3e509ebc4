"""The training config (its planner block, old flat configs, presets) and the train / export
commands' arguments, provenance command lines and code version. No training here."""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from l3p.core import PlannerConfig
from l3p.core.commandline import ConfigError
from l3p.core.errors import L3PError
from l3p.core.config import OPTIONS
from l3p.core.overrides import OverrideError
from l3p.training.commands import (TrainArgumentError, _command_line, add_export_arguments, add_train_arguments,
                                   train_config)
from l3p.training.config import PLANNER_KEYS, TrainConfig
from l3p.training.presets import preset
from l3p.training.export import code_state

ROOT = Path(__file__).resolve().parents[1]


def shipped_config(name: str) -> dict:
    return json.loads((ROOT / "models" / name / "manifest.json").read_text())["provenance"]["config"]


def test_an_old_flat_config_loads_to_the_same_values():
    flat = shipped_config("FetchPush-v4")
    assert "d_max" in flat and "planner" not in flat  # written before the planner block
    cfg = TrainConfig.from_dict(flat)
    for key, value in flat.items():
        got = getattr(cfg.planner, key) if key in PLANNER_KEYS else getattr(cfg, key)
        assert got == value, key
    assert cfg.planner == PlannerConfig(d_max=15.0, temperature=1.1, search="soft", search_iterations=20,
                                        local_horizon=10.0, counter_extra=1, prune_failed=False)
    assert cfg.batch_size == 1024 and cfg.n_envs == 16 and cfg.planning_start_episodes == 8000
    # Written again, it is the nested form, and it reads back to the same config.
    nested = cfg.to_dict()
    assert "d_max" not in nested and nested["planner"]["d_max"] == 15.0
    assert TrainConfig.from_dict(nested) == cfg
    maze = TrainConfig.from_dict(shipped_config("PointMaze_Large-v3"))
    assert (maze.planner.d_max, maze.planner.local_horizon, maze.max_episode_steps) == (40.0, 20.0, 200)


def test_the_shipped_ant_mazes_were_trained_by_their_presets_as_they_stand():
    """`l3p train --env NAME` reproduces each shipped ant model's config: the one --set each run
    was given (goal_radius 0.3 for the UMaze, polyak 0.995 for Medium) is now its preset's."""
    assert TrainConfig.from_dict(shipped_config("AntMaze_Medium-v5")) == preset("AntMaze_Medium-v5")
    assert TrainConfig.from_dict(shipped_config("AntMaze_UMaze-v5")) == preset("AntMaze_UMaze-v5")


def test_planner_options_are_routed_into_the_planner():
    cfg = preset("FetchReach-v4")
    assert cfg.replace(d_max=30, search="hard").planner == cfg.planner.replace(d_max=30, search="hard")
    assert cfg.replace(d_max=30).batch_size == cfg.batch_size and cfg.planner.d_max == 15.0  # a copy
    # Top-level planner keys override the planner block (how --set d_max=30 reaches it).
    assert TrainConfig.from_dict({**cfg.to_dict(), "d_max": 30}).planner.d_max == 30
    with pytest.raises(ValueError, match="d_max must be a finite number > 0"):
        cfg.replace(d_max=-1)
    with pytest.raises(ValueError, match="config: unknown key 'not_a_field'; l3p train --show-config lists them"):
        TrainConfig.from_dict({**cfg.to_dict(), "not_a_field": 1})
    with pytest.raises(ValueError, match="config: planner: unknown key 'nope'; the keys are: mode, d_max"):
        TrainConfig.from_dict({**cfg.to_dict(), "planner": {"nope": 1}})
    with pytest.raises(ValueError, match="planner.mode"):
        TrainConfig(planner=PlannerConfig(mode="naive"))


def test_presets_hold_their_planner_and_an_env_without_one_gets_the_defaults():
    maze = preset("PointMaze_Large-v3")
    assert maze.planner == PlannerConfig(d_max=40.0, local_horizon=20.0, prune_failed=True)
    assert preset("FetchPush-v4").planner == PlannerConfig()
    assert preset("mypackage.envs:MyGoalEnv") == TrainConfig(env_id="mypackage.envs:MyGoalEnv")


def parse(add, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add(parser)
    return parser.parse_args(list(argv))


def test_train_arguments_make_the_config():
    args = parse(add_train_arguments, "--env", "PointMaze_Large-v3", "--steps", "400", "--seed", "3",
                 "--set", "d_max=30", "--set", "search=hard", "--set", "batch_size=64")
    cfg = train_config(args)
    assert cfg.planner.d_max == 30 and cfg.planner.search == "hard" and cfg.planner.local_horizon == 20.0
    assert (cfg.total_env_steps, cfg.seed, cfg.batch_size, cfg.n_envs) == (400, 3, 64, 4)
    with pytest.raises(ConfigError, match="--set: unknown key 'nope'"):
        train_config(parse(add_train_arguments, "--env", "FetchReach-v4", "--set", "nope=1"))
    with pytest.raises(OverrideError, match="--set expects key=value"):
        train_config(parse(add_train_arguments, "--env", "FetchReach-v4", "--set", "d_max"))
    with pytest.raises(TrainArgumentError, match="give --env"):
        train_config(parse(add_train_arguments))


def test_placement_options_and_their_one_line_errors():
    cfg = train_config(parse(add_train_arguments, "--env", "FetchPush-v4", "--set", "collectors=4", "--set",
                             "device=auto", "--set", 'collector="ray"', "--ray-address", "ray://head:10001"))
    assert (cfg.collectors, cfg.device, cfg.collector, cfg.ray_address) == (4, "auto", "ray", "ray://head:10001")
    for bad, message in ((["collectors=0"], "collectors must be between 1 and n_envs \\(16\\), got 0"),
                         (['device="tpu"'], "device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got 'tpu'"),
                         (['collector="inline"', "collectors=2"], "collector 'inline' has one collector"),
                         (["max_staleness=-1"], "max_staleness must be >= 0")):
        with pytest.raises(TrainArgumentError, match=f"--set: {message}"):
            train_config(parse(add_train_arguments, "--env", "FetchPush-v4", *[a for b in bad for a in ("--set", b)]))


@pytest.mark.parametrize("sets, message", [
    (["n_envs=four"], "--set n_envs: expected an integer, got 'four'"),
    (["n_env=4"], "--set: unknown key 'n_env' (did you mean 'n_envs'?); l3p train --show-config lists them"),
    (["d_mx=30"], "--set: unknown key 'd_mx' (did you mean 'd_max'?); l3p train --show-config lists them"),
    (["d_max=far"], "--set d_max: expected a number, got 'far'"),
    (["goal_radius=[1]"], "--set goal_radius: expected a number or null, got [1]"),
    (["overlap_updates=1"], "--set overlap_updates: expected true or false, got 1"),
    (["collector=proces"], "--set: collector must be one of inline, process, ray, got 'proces' "
                           "(did you mean 'process'?)"),
    (["search=sof"], "--set: search must be one of ('soft', 'hard', 'expectation'), got 'sof' "
                     "(did you mean 'soft'?)"),
])
def test_a_bad_set_names_the_key_the_value_and_the_expected_type(sets, message):
    args = parse(add_train_arguments, "--env", "FetchPush-v4", *[a for s in sets for a in ("--set", s)])
    with pytest.raises(L3PError) as err:
        train_config(args)
    assert str(err.value) == message


def test_a_config_file_is_checked_as_the_command_line_is(tmp_path):
    (tmp_path / "run.toml").write_text('env_id = "FetchReach-v4"\nbatch_siz = 3\n')
    with pytest.raises(ConfigError, match=r"config file .*run.toml: unknown key 'batch_siz' "
                                          r"\(did you mean 'batch_size'\?\)"):
        train_config(parse(add_train_arguments, "--config", str(tmp_path / "run.toml")))
    (tmp_path / "run.toml").write_text('env_id = "FetchReach-v4"\n[planner]\nd_max = "x"\n')
    with pytest.raises(ConfigError, match=r"run.toml: planner: d_max: expected a number, got 'x'"):
        train_config(parse(add_train_arguments, "--config", str(tmp_path / "run.toml")))


def test_show_config_lists_every_key_with_its_value_type_and_help(capsys):
    from l3p.training.commands import run_train

    args = parse(add_train_arguments, "--show-config", "--env", "PointMaze_Large-v3", "--set", "d_max=30")
    assert run_train(args) == 0
    text = capsys.readouterr().out
    keys = [line.split(" = ")[0] for line in text.splitlines() if not line.startswith(" ")]
    fields = [f.name for f in dataclasses.fields(TrainConfig) if f.name != "planner"]
    assert sorted(keys) == sorted(fields + list(PLANNER_KEYS))
    assert "n_envs = 4  (an integer)\n    episodes collected in lockstep per cycle\n" in text  # the preset's value
    assert f"d_max = 30  (a number)\n    {OPTIONS['d_max'].doc}\n" in text  # --set's, with the table's doc
    # Every key has its help line.
    assert text.count("\n    ") == len(keys)


def test_planner_help_lists_every_option():
    parser = argparse.ArgumentParser()
    add_export_arguments(parser)
    text = " ".join(parser.format_help().split()).replace("- ", "-")  # argparse wraps after a hyphen
    for name, option in OPTIONS.items():
        assert f"{name}: {' '.join(option.doc.split())}" in text


def test_command_lines_are_rebuilt_from_the_arguments():
    assert _command_line("train", [], [("--env", "FetchReach-v4"), ("--out", None), ("--set", ["a=1", "b=x y"]),
                                       ("--force", True), ("--seed", 0)]) == \
        "l3p train --env FetchReach-v4 --set a=1 --set 'b=x y' --force --seed 0"


def test_code_version_is_the_distribution_version_and_the_checkout():
    version = metadata.version("l3p-service")
    recorded = code_state()["code_version"]
    assert recorded.startswith(version)
    if (ROOT / ".git").exists():  # this test runs from a source checkout
        assert recorded.startswith(f"{version} (git ") and recorded.endswith(")")


def test_a_dirty_checkout_records_its_uncommitted_files(tmp_path):
    """``-dirty`` alone does not say how far the code was from the commit: the tracked files that
    differ are recorded beside it (untracked files, which --dirty ignores, are not)."""
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("x = 1\n")
    git("add", "a.py", "b.py")
    git("commit", "-q", "-m", "one")
    state = code_state(tmp_path)
    assert not state["code_version"].endswith("-dirty)") and "uncommitted" not in state
    (tmp_path / "b.py").write_text("x = 2\n")
    (tmp_path / "new.py").write_text("")  # untracked
    state = code_state(tmp_path)
    assert state["code_version"].endswith("-dirty)") and state["uncommitted"] == ["b.py"]


@pytest.mark.parametrize("shift, caught", [(3e-4, False), (1e-2, True)])
def test_export_parity_tolerates_float_rounding_in_actions_not_a_wrong_action(tmp_path, shift, caught):
    """A trained actor's actions differ between onnxruntime and torch by float32 summation order
    (up to 3e-4 of the bound measured on the ant); an actor that is off by more is refused."""
    import torch

    from bundles import untrained_agent
    from l3p.training.export import ExportError, check_parity, export_bundle

    agent, provenance = untrained_agent()
    bundle = export_bundle(agent, tmp_path / "b", provenance, force=True)
    with torch.no_grad():  # torch now differs from the exported graphs by about `shift` in each action
        agent.actor.net[-1].bias += shift / agent.actor.action_max
    if caught:
        with pytest.raises(ExportError, match="differ from torch"):
            check_parity(agent, bundle)
    else:
        assert check_parity(agent, bundle) <= 1.0


def test_offline_goal_fractions_that_sum_to_one_are_accepted():
    """relabel_p + random_goal_p <= 1 as a sum: 1.0 - 0.8 is below 0.2 in floats."""
    from l3p.training.presets import preset
    cfg = preset("PointMaze_Large-v3").replace(dataset="d.npz", relabel_p=0.8, random_goal_p=0.2)
    assert cfg.relabel_p + cfg.random_goal_p == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"relabel_p \+ random_goal_p <= 1, got 0.2 \(relabel_p 0.85\)"):
        preset("PointMaze_Large-v3").replace(dataset="d.npz", relabel_p=0.85, random_goal_p=0.2)
