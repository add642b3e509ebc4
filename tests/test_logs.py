"""The server's log lines: text for a person on a terminal, JSON for a shipper otherwise (or as
asked with --log-format); a line per episode only with --log-level debug."""
from __future__ import annotations

import json
import logging
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from l3p.serving.local_server import LocalServer
from l3p.serving.logs import TextFormatter

ROOT = Path(__file__).resolve().parents[1]
PUSH = ROOT / "models" / "FetchPush-v4"


def record(name: str, **fields) -> logging.LogRecord:
    return logging.getLogger("t").makeRecord("t", logging.INFO, "", 0, name, None, None, extra={"fields": fields})


def test_a_text_line_quotes_what_a_client_chose():
    line = TextFormatter().format(record("request_refused", method="Act", code="INVALID_ARGUMENT",
                                         message="bad\ngoal: [1, 2]", live=3))
    assert "\n" not in line
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} info    request_refused method=Act code=INVALID_ARGUMENT "
                        r'message="bad\\ngoal: \[1, 2\]" live=3', line), line


def one_episode(target: str) -> None:
    from l3p.clients.client import PlannerClient

    with PlannerClient(target, timeout_s=10) as client:
        info = client.model_info()
        with client.episode(np.zeros(info.goal_dim), mode="policy") as ep:
            ep.act(np.zeros(info.obs_dim))


@pytest.mark.parametrize("args, kind", [([], "json"), (["--log-format", "text"], "text")])
def test_serve_writes_json_in_a_pipe_text_when_asked_and_no_line_per_episode(args, kind):
    with LocalServer(PUSH, extra_args=args, stderr_lines=200) as server:
        one_episode(server.target)
    lines = server.stderr_tail(200).splitlines()  # all of them: the server has stopped
    ours = [line for line in lines if not line.startswith(("E0", "W0", "I0"))]  # gRPC core's own
    if kind == "json":
        events = [json.loads(line)["event"] for line in ours]
    else:
        assert not any(line.startswith("{") for line in ours)
        events = [line.split()[2] for line in ours]
    assert "serving" in events and "model_loaded" in events
    assert not {"session_started", "session_ended"} & set(events)


def test_serve_on_a_terminal_writes_text_and_debug_adds_a_line_per_episode():
    primary, secondary = pty.openpty()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "l3p.serving", "--bundle", str(PUSH), "--port", "0",
                             "--log-level", "debug", "--exit-with-parent", str(os.getpid())],
                            stdout=subprocess.PIPE, stderr=secondary, text=True, env=env)
    os.close(secondary)
    try:
        ready = proc.stdout.readline()
        assert ready.startswith("L3P_SERVER_READY port="), ready
        one_episode(f"127.0.0.1:{ready.split('=')[1].strip()}")
        text = ""
        while "session_ended" not in text:
            if not select.select([primary], [], [], 30)[0]:
                break
            text += os.read(primary, 65536).decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        os.close(primary)
    lines = [line for line in text.splitlines() if re.match(r"\d\d:\d\d:\d\d\.\d{3} ", line)]
    events = [line.split()[2] for line in lines]
    assert "serving" in events and "session_started" in events and "session_ended" in events, text
    assert not any(line.lstrip().startswith("{") for line in text.splitlines())
    started = next(line for line in lines if line.split()[2] == "session_started")
    assert " debug   session_started session=" in started and " mode=policy " in started
