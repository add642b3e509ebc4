"""Sizes checked before a long recording and at import: ``l3p dataset check``, ``l3p ros2 record`` at
start, ``l3p dataset import`` against the env; each a real process, each problem one line naming the fix."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
POINT_GOAL = """format: rosbag2
env_id: PointMaze_Large-v3
observation: [{topic: /base/observation, fields: [data], indices: [0, 1, 2, 3]}]
action: [{topic: /base/cmd, indices: [0, 1]}]
achieved_goal_indices: [0, 1]
desired_goal: [{topic: /base/goal, type: geometry_msgs/msg/PointStamped}]
"""
FIX = "give desired_goal[0] fields: [point.x, point.y]"


def l3p(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l3p", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_a_point_goal_against_a_planar_achieved_goal_is_refused_before_recording_naming_the_fields(tmp_path):
    pytest.importorskip("yaml")
    mapping = tmp_path / "base.yaml"
    mapping.write_text(POINT_GOAL)
    check = l3p("dataset", "check", str(mapping), "--bundle", str(ROOT / "models" / "PointMaze_Large-v3"))
    assert check.returncode == 2 and check.stdout == ""
    assert check.stderr.strip().endswith(
        f"mapping {mapping} does not fit bundle {ROOT / 'models' / 'PointMaze_Large-v3'}: desired_goal gives 3 "
        f"values, achieved_goal_indices [0, 1] pick 2: {FIX}; desired_goal gives 3 values, bundle "
        f"{ROOT / 'models' / 'PointMaze_Large-v3'} has goal 2: {FIX}")
    if importlib.util.find_spec("rclpy") is not None:
        record = l3p("ros2", "record", "--mapping", str(mapping), "--out", str(tmp_path / "rec.npz"), "--duration", "1")
        assert record.returncode == 2 and not (tmp_path / "rec.npz").exists()
        assert record.stderr.strip().endswith(f"{FIX} (l3p dataset check MAPPING --env-id ENV compares it with the env)")
    mapping.write_text(POINT_GOAL.replace("type: geometry_msgs/msg/PointStamped", "fields: [point.x, point.y]"))
    fixed = l3p("dataset", "check", str(mapping), "--bundle", str(ROOT / "models" / "PointMaze_Large-v3"))
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.strip().endswith("(obs 4, goal 2, action 2): observation 4, action 2, desired_goal 2, "
                                         "achieved_goal 2")


def test_a_lerobot_import_with_wrong_sizes_or_a_misspelt_env_is_refused(tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("gymnasium_robotics")
    from test_datasets import write_lerobot

    rng = np.random.default_rng(0)
    root = write_lerobot(tmp_path / "arm", rng.normal(size=(20, 6)), rng.normal(size=(20, 2)), [10, 10])
    mapping = tmp_path / "arm.yaml"
    mapping.write_text("format: lerobot\nenv_id: PointMaze_Large-v3\nachieved_goal_indices: [0, 1]\n")
    out = tmp_path / "arm.npz"
    wrong = l3p("dataset", "import", "lerobot", str(root), "--mapping", str(mapping), "--out", str(out))
    assert wrong.returncode == 2 and not out.exists()
    assert wrong.stderr.strip().endswith("does not fit env PointMaze_Large-v3: observations have 6 values, "
                                         "env PointMaze_Large-v3 has obs 4")
    misspelt = l3p("dataset", "import", "lerobot", str(root), "--mapping", str(mapping), "--out", str(out),
                   "--env-id", "PointMaze_Larg-v3")
    assert misspelt.returncode == 2 and not out.exists()
    assert "env_id 'PointMaze_Larg-v3' is not an env this install can make (did you mean 'PointMaze_Large-v3'?)" \
        in misspelt.stderr
