"""The examples/ scripts run as a user runs them, from the checkout root."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from l3p.serving.local_server import LocalServer

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_the_readme_driving_loop_says_where_each_episode_headed():
    pytest.importorskip("gymnasium_robotics")
    with LocalServer(ROOT / "models" / "FetchPush-v4") as server:
        proc = run("examples/drive_robot.py", "--server", server.target, "--episodes", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("FetchPush-v4: obs 25, goal 3, ")
    assert [re.fullmatch(r"seed (\d+): success (True|False), last heading for (the goal itself|landmark \d+)",
                         line)[1] for line in lines[1:]] == ["2000000000", "2000000001", "2000000002"]


def test_your_own_env_trains_exports_serves_and_drives(tmp_path):
    pytest.importorskip("torch")
    proc = run("examples/point_reach.py", "--out", str(tmp_path / "run"), "--steps", "2400", "--episodes", "5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^trained 2400 env steps: success \d\.\d\d with the policy alone, \d\.\d\d through the "
                     r"planner$", proc.stdout, re.MULTILINE), proc.stdout
    assert re.search(r"^[0-5]/5 episodes reached their goal through the server$", proc.stdout, re.MULTILINE)
    manifest = json.loads((tmp_path / "run" / "bundle" / "manifest.json").read_text())
    assert manifest["env_id"] == "point_reach:PointReach"


def test_an_unmodified_openpi_robot_loop_drives_a_model_named_by_its_url(tmp_path):
    pytest.importorskip("gymnasium_robotics")
    pytest.importorskip("openpi_client")
    with LocalServer(ROOT / "models" / "FetchPush-v4", extra_args=["--openpi-port", "0"]) as server:
        proc = run("examples/openpi_robot.py", "--url", f"ws://127.0.0.1:{server.openpi_port}/models/FetchPush-v4",
                   "--episodes", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "FetchPush-v4: observation/state 25 values, goal 3, action_horizon 1"
    assert [re.fullmatch(r"seed \d+: episode (\d), success (True|False), 50 steps", line)[1] for line in lines[1:]] \
        == ["0", "1"]
