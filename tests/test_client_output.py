"""What the client commands print: an unreachable server is one line (each retry only with -v),
Ctrl-C in ``l3p eval`` prints and writes the episodes that finished, ``l3p models`` lists what a
server serves."""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from l3p.core.errors import INTERRUPTED, UNAVAILABLE
from l3p.serving.local_server import LocalServer

ROOT = Path(__file__).resolve().parents[1]
PUSH = ROOT / "models" / "FetchPush-v4"
UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1


def l3p(*argv: str, cwd: Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "l3p", *map(str, argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, **kwargs)


@pytest.mark.parametrize("verbose", [False, True])
def test_an_unreachable_server_is_one_line_and_each_retry_only_with_v(verbose, tmp_path):
    pytest.importorskip("gymnasium")
    proc = l3p("eval", "--server", UNREACHABLE, "--episodes", "1", *(["-v"] if verbose else []), cwd=tmp_path)
    out, err = proc.communicate(timeout=120)
    lines = err.splitlines()
    assert (proc.returncode, out) == (UNAVAILABLE, "")
    assert re.fullmatch(rf"l3p eval: error: cannot reach the planner server at {UNREACHABLE}: GetModelInfo: "
                        r"UNAVAILABLE: .* \(gave up after 8 attempts\)", lines[-1]), lines[-1]
    retries = [line for line in lines if re.match(r"GetModelInfo: UNAVAILABLE \(.*\); retry \d/7 in ", line)]
    assert len(retries) == (7 if verbose else 0) and len(lines) == 1 + len(retries), err


def test_ctrl_c_in_eval_prints_and_writes_the_episodes_that_finished(tmp_path):
    pytest.importorskip("gymnasium_robotics")
    with LocalServer(PUSH, extra_args=["--log-level", "debug"], stderr_lines=1000) as server:
        # Ctrl-C as a terminal delivers it: a suite started in the background (`cmd &`) ignores
        # SIGINT, and a child inherits that; the eval is started with SIGINT at its default.
        proc = l3p("eval", "--server", server.target, "--episodes", "1000", "--modes", "policy,l3p",
                   "--out", "eval.json", cwd=tmp_path,
                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 240  # a bound on the wait, not a measurement
        while server.stderr_tail(1000).count('"session_ended"') < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == INTERRUPTED, err
    assert err.splitlines()[-1] == "l3p eval: interrupted"
    report = json.loads((tmp_path / "eval.json").read_text())
    assert report["interrupted"] is True and list(report["modes"]) == ["policy"]
    finished = report["modes"]["policy"]["episodes"]
    assert 3 <= finished < 1000 and len(report["modes"]["policy"]["per_episode"]) == finished
    assert "interrupted: the episodes that finished" in out.splitlines()[0]
    row = next(line for line in out.splitlines() if line.startswith("policy "))
    assert f"/{finished} (" in row and out.rstrip().endswith("wrote eval.json")


def test_l3p_models_lists_each_served_model_with_its_env_dims_signer_and_state(tmp_path):
    repository = tmp_path / "models"
    repository.mkdir()
    for name in ("FetchPush-v4", "PointMaze_Large-v3"):
        shutil.copytree(ROOT / "models" / name, repository / name)  # symbolic links are never served
    with LocalServer(models=repository, extra_args=["--default-model", "PointMaze_Large-v3"]) as server:
        table = l3p("models", "--server", server.target, cwd=tmp_path).communicate(timeout=120)
        listed = l3p("models", "--server", server.target, "--json", cwd=tmp_path).communicate(timeout=120)
    lines = table[0].splitlines()
    assert lines[0].split() == ["name", "version", "env", "obs/goal/action", "landmarks", "signed_by", "state"]
    assert re.fullmatch(r"FetchPush-v4 +- +FetchPush-v4 +25/3/4 +\d+ +- +serving, 0 live episodes", lines[1])
    assert re.fullmatch(r"PointMaze_Large-v3 \* +- +PointMaze_Large-v3 +4/2/2 +50 +- +serving, 0 live episodes",
                        lines[2])
    assert lines[3] == "* the default model: requests that name none get it" and table[1] == ""
    models = json.loads(listed[0])
    assert [(m["name"], m["default"], m["dims"], m["loaded"]) for m in models] == [
        ("FetchPush-v4", False, [25, 3, 4], True), ("PointMaze_Large-v3", True, [4, 2, 2], True)]
