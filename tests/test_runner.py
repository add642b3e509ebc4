"""The MuJoCo Fetch runner, the evaluator and the demo, against the real server."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import l3p.demo as demo_mod
from l3p.serving.repository import scan
from l3p import cli
from l3p.clients.evaluate import wilson_interval
from l3p.clients.run_config import RunConfig, parse_modes
from l3p.clients.runner import run
from l3p.core.commandline import parse_config
from l3p.core.errors import UNAVAILABLE, USAGE
from l3p.serving.local_server import LocalServer
from server_proc import serve

pytest.importorskip("gymnasium_robotics")


@pytest.fixture(scope="module")
def server(push_bundle):
    with serve(push_bundle) as port:
        yield f"127.0.0.1:{port}"


def run_args(*argv: str) -> RunConfig:
    return parse_config(RunConfig, list(argv))


def l3p(capsys, *argv: str) -> tuple[int, str, str]:
    """The `l3p` command in this process, as a user runs it: exit code, stdout, stderr."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str, command: str) -> str:
    """The command's one error line: the only stderr line with the `l3p COMMAND: error: ` prefix
    (a multi-line message, e.g. with a server's stderr tail, goes on after it)."""
    (line,) = [line for line in err.splitlines() if line.startswith(f"l3p {command}: error: ")]
    assert "\nerror: " not in f"\n{err}"  # no unprefixed error line of an app's own
    return line


# --------------------------------------------------------------------------- statistics


def test_wilson_interval_on_known_counts():
    # Reference values: Wilson score interval, z = 1.96 (e.g. Newcombe 1998, Table I).
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    lo, hi = wilson_interval(81, 263)
    assert lo == pytest.approx(0.2553, abs=1e-4) and hi == pytest.approx(0.3662, abs=1e-4)
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson_interval(10, 10) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    for k in range(11):  # symmetric in successes <-> failures
        lo, hi = wilson_interval(k, 10)
        lo2, hi2 = wilson_interval(10 - k, 10)
        assert lo <= k / 10 <= hi and lo == pytest.approx(1 - hi2) and hi == pytest.approx(1 - lo2)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_parse_modes():
    assert parse_modes("l3p, policy") == ("l3p", "policy")
    with pytest.raises(ValueError, match="l3p"):
        parse_modes("l3p,greedy")


# --------------------------------------------------------------------------- runner


def test_runner_short_episodes_are_reproducible(server):
    args = run_args("--server", server, "--env", "FetchPush-v4", "--episodes", "2", "--seed", "7")
    result = run(args)
    assert [e.env_seed for e in result.episodes] == [7, 8]
    assert [e.planner_seed for e in result.episodes] == [7, 8]
    assert all(isinstance(e.success, bool) for e in result.episodes)
    assert all(e.steps == 50 for e in result.episodes)  # FetchPush's time limit
    lat = result.latencies_s
    assert len(lat) == 100 and all(math.isfinite(t) and t > 0 for t in lat)
    assert math.isfinite(result.latency_p50_ms) and result.latency_p99_ms >= result.latency_p50_ms

    # Same seed, same episodes: unary and stream alike.
    again = run(run_args("--server", server, "--episodes", "2", "--seed", "7", "--stream"))
    np.testing.assert_allclose([e.final_distance for e in again.episodes],
                               [e.final_distance for e in result.episodes], atol=1e-6)


def test_runner_refuses_another_env(server, capsys):
    code, out, err = l3p(capsys, "run", "--server", server, "--env", "FetchReach-v4", "--episodes", "1")
    assert code == USAGE and out == ""
    assert err == ("l3p run: error: the server's model was trained on 'FetchPush-v4', not 'FetchReach-v4'; "
                   "FetchReach-v4 has obs/goal dims 10/3, the model 25/3\n")  # dims can't be forced


def test_runner_reports_an_unreachable_server(monkeypatch, capsys):
    # The default retry policy waits ~10 s for a restart; nobody listens on port 1.
    import l3p.clients.connection as runner_mod
    from l3p.clients.client import PlannerClient

    monkeypatch.setattr(runner_mod, "PlannerClient",
                        lambda target, **kw: PlannerClient(target, retry=None, **kw))
    for command, *extra in (["run"], ["eval", "--no-progress"]):
        code, out, err = l3p(capsys, command, "--server", "127.0.0.1:1", "--episodes", "1", *extra)
        assert code == UNAVAILABLE and out == ""
        assert error_line(err, command).startswith(
            f"l3p {command}: error: cannot reach the planner server at 127.0.0.1:1: GetModelInfo: UNAVAILABLE: ")
        assert err.count("\n") == 1


def _rendering_probe() -> str | None:
    """Why offscreen rendering fails here, or None. In a subprocess: a GL driver that cannot
    initialize may abort the process, which must skip the test, not crash the run."""
    code = ("import sys; from l3p.sim.envs import rendering_unavailable; "
            "r = rendering_unavailable('FetchPush-v4'); print(r or ''); sys.exit(1 if r else 0)")
    try:
        probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=120, cwd=Path(demo_mod.__file__).resolve().parents[1])
    except subprocess.TimeoutExpired:
        return "the rendering probe timed out"
    if probe.returncode == 0:
        return None
    lines = (probe.stdout.strip() or probe.stderr.strip() or f"exit code {probe.returncode}").splitlines()
    return lines[-1]


def require_rendering() -> None:
    reason = _rendering_probe()
    if reason:
        pytest.skip(f"offscreen rendering unavailable: {reason}")
    pytest.importorskip("imageio.v2")


def video_frames(path: Path) -> list[np.ndarray]:
    import imageio.v2 as imageio

    reader = imageio.get_reader(str(path))
    try:
        return [f for f in reader]
    finally:
        reader.close()


def test_video_is_a_playable_mp4(server, tmp_path, capsys):
    require_rendering()
    out = tmp_path / "episode.mp4"
    code, _, _ = l3p(capsys, "run", "--server", server, "--episodes", "1", "--seed", "3",
                     "--video", str(out), "--video-size", "128")
    assert code == 0
    frames = video_frames(out)
    assert len(frames) == 51  # one per step plus the final state
    assert frames[0].shape == (128, 128, 3) and frames[0].dtype == np.uint8
    assert frames[0].std() > 0  # not a blank frame


# --------------------------------------------------------------------------- eval + demo


EVAL_MODE_FIELDS = {"episodes", "successes", "success_rate", "success_ci95", "reached", "mean_final_distance",
                    "replans_per_episode", "latency_ms", "per_episode"}


def test_eval_writes_the_documented_json(server, tmp_path, capsys):
    out = tmp_path / "results.json"
    code, table, _ = l3p(capsys, "eval", "--server", server, "--episodes", "2", "--seed", "11",
                         "--modes", "l3p,policy", "--out", str(out), "--no-progress")
    assert code == 0
    report = json.loads(out.read_text())
    assert report["env_id"] == "FetchPush-v4" and report["episodes"] == 2
    assert report["seed"] == 11 and report["seeds"] == [11, 12]
    assert len(report["model"]["bundle_sha256"]) == 64
    assert list(report["modes"]) == ["l3p", "policy"]
    for mode, m in report["modes"].items():
        assert EVAL_MODE_FIELDS <= set(m), mode
        assert m["episodes"] == 2 and m["success_rate"] == m["successes"] / 2
        assert m["success_ci95"] == pytest.approx(list(wilson_interval(m["successes"], 2)))
        assert m["latency_ms"]["p50"] > 0 and m["latency_ms"]["p99"] >= m["latency_ms"]["p50"]
        assert [e["env_seed"] for e in m["per_episode"]] == [11, 12]
        for e in m["per_episode"]:  # a success at the last step was reached by then; reached counts them
            assert e["reached_at"] is None or 1 <= e["reached_at"] <= e["steps"]
            assert not e["success"] or e["reached_at"] is not None
        assert m["reached"] == sum(e["reached_at"] is not None for e in m["per_episode"]) >= m["successes"]
    assert report["modes"]["policy"]["replans_per_episode"] == 0
    assert report["modes"]["l3p"]["replans_per_episode"] >= 1
    assert "l3p" in table and "policy" in table and "95% CI" in table


def test_run_over_tls_with_a_token(push_bundle, tls_dir, token_file, capsys):
    path, tokens = token_file
    token = path.parent / "robot-b.token"
    token.write_text(f"robot-b:{tokens['robot-b']}\n")
    serve_args = ["--tls-cert", str(tls_dir / "server.crt"), "--tls-key", str(tls_dir / "server.key"),
                  "--auth-token-file", str(path)]
    with LocalServer(push_bundle, extra_args=serve_args) as served:
        argv = ["run", "--server", f"127.0.0.1:{served.port}", "--episodes", "1", "--planner", "policy"]
        code, out, _ = l3p(capsys, *argv, "--tls-ca", str(tls_dir / "ca.crt"), "--token-file", str(token))
        assert code == 0 and ("success 1/1" in out or "success 0/1" in out)
        assert "resumes 0" in out
        code, _, err = l3p(capsys, *argv, "--tls-ca", str(tls_dir / "ca.crt"))  # no token
        assert code == UNAVAILABLE and err.count("\n") == 1
        assert error_line(err, "run").startswith(f"l3p run: error: cannot reach the planner server at "
                                                 f"127.0.0.1:{served.port}: GetModelInfo: UNAUTHENTICATED: ")
        code, _, err = l3p(capsys, *argv, "--tls-ca", str(tls_dir / "missing.crt"))
        assert code == USAGE and err.count("\n") == 1
        assert error_line(err, "run").startswith("l3p run: error: ") and "missing.crt" in err


class _RecordingServer(LocalServer):
    instances: list[LocalServer] = []

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        _RecordingServer.instances.append(self)


def _demo(argv, monkeypatch, capsys) -> tuple[int, str, str]:
    """`l3p demo` with every server it starts recorded."""
    _RecordingServer.instances.clear()
    monkeypatch.setattr(demo_mod, "LocalServer", _RecordingServer)
    return l3p(capsys, "demo", *argv)


def test_demo_runs_episodes_and_stops_the_server(push_bundle, monkeypatch, capsys):
    code, out, _ = _demo(["--bundle", str(push_bundle), "--episodes", "1", "--no-progress"], monkeypatch, capsys)
    assert code == 0 and "success" in out
    (server,) = _RecordingServer.instances
    assert server.proc.poll() is not None  # stopped


def test_demo_reports_a_server_that_dies(push_bundle, tmp_path, monkeypatch, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in push_bundle.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    with open(broken / "value.onnx", "ab") as fh:
        fh.write(b"tampered")
    code, out, err = _demo(["--bundle", str(broken), "--episodes", "1"], monkeypatch, capsys)
    assert code == UNAVAILABLE and out == ""
    assert "before it was ready" in error_line(err, "demo")
    assert "value.onnx" in err.partition("stderr tail:")[2]  # the server's own words
    assert _RecordingServer.instances[0].proc.poll() is not None


def test_demo_refuses_a_directory_without_a_bundle(tmp_path, monkeypatch, capsys):
    code, out, err = _demo(["--bundle", str(tmp_path)], monkeypatch, capsys)
    assert code == USAGE and out == "" and _RecordingServer.instances == []
    assert err == f"l3p demo: error: no model bundle at {tmp_path} (missing manifest.json); pass --bundle DIR\n"


def test_demo_serves_every_model_from_one_server(push_bundle, untrained_bundle, tmp_path, monkeypatch, capsys):
    root = tmp_path / "models"
    shutil.copytree(push_bundle, root / "FetchPush-v4")
    shutil.copytree(untrained_bundle, root / "FetchReach-v4")
    (root / "FetchReach-v4" / "eval_heldout.json").write_text("{}")  # files beside a bundle
    code, out, err = _demo(["--models", str(root), "--episodes", "1", "--modes", "policy", "--no-progress"],
                           monkeypatch, capsys)
    assert code == 0
    (server,) = _RecordingServer.instances  # one server for both models
    assert server.proc.poll() is not None  # stopped
    titles = [line.split(":")[0] for line in out.splitlines() if "episodes of" in line]
    assert titles == ["FetchPush-v4", "FetchReach-v4"]  # the default model first


def test_the_shipped_models_are_one_repository():
    found = scan(demo_mod.models_dir())
    assert {"FetchPush-v4", "FetchPickAndPlace-v4", "FetchBoxDistractor-v0", "FetchPlaceInsideBox-v0",
            "PointMaze_Large-v3", "AntMaze_UMaze-v5", "AntMaze_Medium-v5"} <= set(found)
    assert all(c.version == "" and c.path.parts[-2] == "models" for c in found.values())


def test_run_and_eval_name_the_model_of_a_repository(push_bundle, untrained_bundle, tmp_path, capsys):
    root = tmp_path / "models"
    shutil.copytree(push_bundle, root / "FetchPush-v4")
    shutil.copytree(untrained_bundle, root / "FetchReach-v4")
    with LocalServer(models=root) as server:
        code, out, _ = l3p(capsys, "eval", "--server", server.target, "--model", "FetchReach-v4",
                           "--episodes", "1", "--modes", "policy", "--no-progress")
        assert code == 0 and out.startswith("FetchReach-v4: 1 episodes")
        code, out, err = l3p(capsys, "run", "--server", server.target, "--model", "legs", "--episodes", "1")
        assert code == USAGE and out == ""
        assert error_line(err, "run") == (
            f"l3p run: error: {server.target}: model 'legs' is not served here; models: FetchPush-v4, "
            "FetchReach-v4 (ListModels; an empty name is the default, FetchPush-v4)")
