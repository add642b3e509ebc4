"""What the client commands print: an unreachable server is one line (each retry only with -v),
and Ctrl-C in ``l3p eval`` prints and writes the episodes that finished."""
from __future__ import annotations

import json
import re
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
        proc = l3p("eval", "--server", server.target, "--episodes", "1000", "--modes", "policy,l3p",
                   "--out", "eval.json", cwd=tmp_path)
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
