"""Configs as data: ``--config FILE`` for serve, eval and train (the command line overrides the
file), and the frictions around them, each with its fix: held-out seeds by default, TLS/plaintext
mismatches named, ``goal=None`` named, no carriage-return frames in a pipe."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from l3p.clients.run_config import EvalConfig, RunConfig
from l3p.core.commandline import ConfigError, parse_config
from l3p.core.errors import USAGE
from l3p.core.seeds import HELD_OUT
from l3p.serving.config import ServeConfig
from l3p.serving.local_server import LocalServer

ROOT = Path(__file__).resolve().parents[1]
PUSH = ROOT / "models" / "FetchPush-v4"
DIGEST = "a" * 64


def test_a_serve_file_is_read_checked_and_overridden_by_the_command_line(tmp_path):
    path = tmp_path / "serve.toml"
    path.write_text(f'bundle = "{PUSH}"\nport = 1234\nmax-sessions = 8\nreflection = true\n'
                    f'model_sha256 = ["m={DIGEST}"]\n')
    config = parse_config(ServeConfig, ["--config", str(path), "--port", "99"])
    assert (config.bundle, config.port, config.max_sessions, config.reflection) == (PUSH, 99, 8, True)
    assert config.model_sha256 == (("m", DIGEST),) and config.session_ttl == 300.0  # untouched default

    path.write_text(f'bundle = "{PUSH}"\nmax_session = 8\n')
    with pytest.raises(ConfigError, match=r"unknown key 'max_session' \(did you mean 'max_sessions'\?\)"):
        parse_config(ServeConfig, ["--config", str(path)])
    path.write_text(f'bundle = "{PUSH}"\nport = 70000\n')
    with pytest.raises(ConfigError, match=r"serve.toml: port: expected a port in \[0, 65535\], got 70000"):
        parse_config(ServeConfig, ["--config", str(path)])
    path.write_text('port = "x"\n')
    with pytest.raises(ConfigError, match=r"port: expected an integer, got 'x'"):
        parse_config(ServeConfig, ["--config", str(path)])
    path.write_text("port = \n")
    with pytest.raises(ConfigError, match=r"serve.toml: not valid TOML"):
        parse_config(ServeConfig, ["--config", str(path)])


def test_eval_and_run_default_to_held_out_seeds():
    assert parse_config(RunConfig, []).seed == HELD_OUT
    config = parse_config(EvalConfig, ["--modes", "l3p,policy,l3p"])
    assert (config.seed, config.modes, config.progress) == (HELD_OUT, ("l3p", "policy"), True)
    assert parse_config(EvalConfig, ["--no-progress"]).progress is False


def l3p(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l3p", *map(str, argv)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_l3p_serve_config_serves_what_the_file_says(tmp_path):
    (tmp_path / "serve.toml").write_text(f'bundle = "{PUSH}"\nport = 50051\nreplica_id = "r1"\n')
    server = subprocess.Popen([sys.executable, "-m", "l3p", "serve", "--config", "serve.toml", "--port", "0"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = server.stdout.readline()
        match = re.match(r"L3P_SERVER_READY port=(\d+)", ready)
        assert match, server.stderr.read() if server.poll() is not None else ready
        from l3p.clients.client import PlannerClient

        with PlannerClient(f"127.0.0.1:{match.group(1)}") as client:
            assert client.model_info().env_id == "FetchPush-v4"
            with client.episode([1.3, 0.7, 0.42], mode="policy", seed=1) as episode:
                assert episode.session_id.startswith("r1.")  # the file's replica id
    finally:
        server.terminate()
        server.wait(30)
    assert server.returncode == 0


@pytest.fixture(scope="module")
def push_server():
    pytest.importorskip("gymnasium_robotics")
    with LocalServer(PUSH) as server:
        yield server.target


def test_l3p_eval_config_runs_the_files_episodes_on_held_out_seeds(push_server, tmp_path):
    (tmp_path / "eval.toml").write_text(f'server = "{push_server}"\nmodes = ["policy"]\nepisodes = 5\n'
                                        'out = "from-file.json"\n')
    proc = l3p("eval", "--config", "eval.toml", "--episodes", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "from-file.json").read_text())
    assert report["seeds"] == [HELD_OUT, HELD_OUT + 1] and list(report["modes"]) == ["policy"]
    assert f"seeds {HELD_OUT}..{HELD_OUT + 1} (held-out range)" in proc.stdout
    assert "\r" not in proc.stderr  # progress on (the default), but stderr is a pipe: no bar frames


def test_l3p_run_prints_its_seeds_and_no_progress_keeps_only_the_summary(push_server, tmp_path):
    proc = l3p("run", "--server", push_server, "--episodes", "1", "--planner", "policy", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"FetchPush-v4: 1 episodes, seeds {HELD_OUT}..{HELD_OUT} (held-out range)"
    assert lines[1].startswith(f"episode   0  seed {HELD_OUT}  ") and lines[2].startswith("FetchPush-v4  planner policy")
    proc = l3p("run", "--server", push_server, "--episodes", "1", "--planner", "policy", "--no-progress",
               "--seed", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "FetchPush-v4: 1 episodes, seeds 3..3 (training range)" and len(lines) == 2


def test_a_bad_config_file_is_one_line(tmp_path):
    (tmp_path / "eval.json").write_text('{"episodes": 0}')
    proc = l3p("eval", "--config", "eval.json", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (USAGE, "")
    assert proc.stderr == "l3p eval: error: config file eval.json: episodes: must be >= 1, got 0\n"
    proc = l3p("serve", "--config", "missing.toml", cwd=tmp_path)
    assert proc.stderr == "l3p serve: error: config file missing.toml: No such file or directory\n"


def test_train_config_takes_a_runs_config_json(tmp_path):
    pytest.importorskip("torch")
    import argparse

    from l3p.training.commands import add_train_arguments, train_config
    from l3p.training.config import TrainConfig
    from l3p.training.presets import preset

    written = preset("FetchReach-v4").replace(batch_size=64, d_max=12.0)
    (tmp_path / "config.json").write_text(written.dumps())
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    cfg = train_config(parser.parse_args(["--config", str(tmp_path / "config.json"), "--steps", "3000"]))
    assert cfg == written.replace(total_env_steps=3000)  # the file, then the command line
    (tmp_path / "short.toml").write_text('env_id = "FetchReach-v4"\nbatch_siz = 3\n')
    with pytest.raises(ConfigError, match=r"short.toml: unknown key 'batch_siz' \(did you mean 'batch_size'\?\)"):
        train_config(parser.parse_args(["--config", str(tmp_path / "short.toml")]))
    assert isinstance(cfg, TrainConfig)


# -- TLS / plaintext mismatches and goal=None: named, not retried


@pytest.fixture(scope="module")
def tls_and_plain(tls_dir):
    tls = LocalServer(PUSH, extra_args=["--tls-cert", str(tls_dir / "server.crt"),
                                        "--tls-key", str(tls_dir / "server.key")])
    with tls, LocalServer(PUSH) as plain:
        yield tls.target, plain.target


def test_a_plaintext_client_of_a_tls_server_is_told_so(tls_and_plain):
    from l3p.clients.client import PlannerClient, Unavailable

    tls, _ = tls_and_plain
    with PlannerClient(tls) as client, pytest.raises(Unavailable) as err:
        client.model_info()
    assert err.value.message == (f"the server at {tls} speaks TLS and this client connected in plaintext: "
                                 "connect with TLS (--tls-ca PEM; PlannerClient(credentials="
                                 "channel_credentials(ca)))")


def test_a_tls_client_of_a_plaintext_server_is_told_so(tls_and_plain, tls_dir):
    from l3p.clients.client import PlannerClient, Unavailable, channel_credentials

    _, plain = tls_and_plain
    with PlannerClient(plain, credentials=channel_credentials(str(tls_dir / "ca.crt"))) as client:
        with pytest.raises(Unavailable) as err:
            client.model_info()
    assert err.value.message.startswith(f"TLS handshake with {plain} failed: the server does not speak TLS")
    proc = l3p("run", "--server", plain, "--tls-ca", tls_dir / "ca.crt", "--episodes", "1", cwd=tls_dir)
    last = proc.stderr.splitlines()[-1]  # before it, grpc's own native log line of the failed handshake
    assert proc.returncode == 1 and last.startswith(f"l3p run: error: cannot reach the planner server at {plain}: ")
    assert "the server does not speak TLS" in last


def test_goal_none_is_named(tls_and_plain):
    from l3p.clients.client import PlannerClient

    _, plain = tls_and_plain
    with PlannerClient(plain) as client, pytest.raises(ValueError, match="^goal is None: give a vector of floats$"):
        with client.episode(None):
            pass
