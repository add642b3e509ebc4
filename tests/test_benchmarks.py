"""The benchmarks run as a user runs them (`python benchmarks/X.py`, from any directory): the
structure of their output and the values that are not times."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def benchmark(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("name", ["serve_latency", "start_bursts", "train_throughput", "time_to_success", "swap",
                                  "landmark_reach", "learning_speed", "openpi_latency", "hostile_peers"])
def test_each_benchmark_runs_as_a_script_from_anywhere(name, tmp_path):
    assert benchmark(name, "--help", cwd=tmp_path).stdout.startswith("usage: ")


def test_openpi_latency_quick(tmp_path):
    """A short run: both front doors answer every robot, and the targets are checked against the rows."""
    out = tmp_path / "openpi.json"
    printed = benchmark("openpi_latency", "--episodes", "2", "--steps", "5", "--seconds", "0.5", "--robots", "2",
                        "--out", str(out), cwd=tmp_path).stdout
    result = json.loads(out.read_text())
    assert {row["transport"] for row in result["concurrency"]} == {
        "gRPC Control streams (asyncio clients)", "openpi-client (threads in 1 process)",
        "openpi-client (threads in 2 processes)", "openpi frames (asyncio clients)"}
    assert all(row["sessions"] == 2 and row["min_actions_per_session"] > 0 for row in result["concurrency"])
    assert result["latency"]["openpi-client step (all)"]["n"] == result["latency"]["gRPC Control stream step (all)"]["n"] == 10
    assert [row["target"] for row in result["targets"]] == [
        "openpi-client step p50 <= 1.3x the gRPC stream step p50 (keep steps)",
        "openpi-client step p50 <= 1.3x the gRPC stream step p50 (all steps)"]
    assert "openpi targets, this run:" in printed


def test_hostile_peers_quick(tmp_path):
    """A short run: the bystander steps in every condition, the peers' frames are answered and
    refused as the listener's bounds say, and both targets are checked against the rows."""
    out = tmp_path / "hostile.json"
    printed = benchmark("hostile_peers", "--episodes", "1", "--steps", "20", "--rounds", "1", "--peers", "2",
                        "--out", str(out), cwd=tmp_path).stdout
    result = json.loads(out.read_text())["servers"]["this checkout"]
    assert {condition: row["n"] for condition, row in result["bystander_step"].items()} == {
        "alone": 20, "ordinary": 20, "hostile": 20}
    assert set(result["peer_frames"]["ordinary"]) == {"answered"}
    hostile = result["peer_frames"]["hostile"]
    assert hostile["answered"] > 0 and hostile["refused"] > 0 and hostile["reconnects"] >= hostile["refused"]
    assert [row["target"] for row in result["targets"]] == ["p99 with 2 hostile peers <= 2x p99 alone",
                                                            "p99 with 2 hostile peers <= 2x p99 ordinary"]
    assert all(row["measured"] == f"ratio {row['ratio']:.2f}" for row in result["targets"])
    assert "this checkout: targets, this run:" in printed


def test_swap_under_32_sessions_loses_nothing(tmp_path):
    """A short run of the hot swap benchmark: every episode completes, on its own version's actions."""
    out = tmp_path / "swap.json"
    printed = benchmark("swap", "--episodes", "2", "--steps", "10", "--rounds", "1", "--out", str(out),
                        cwd=tmp_path).stdout
    result = json.loads(out.read_text())
    assert result["reload"]["loads"] == [["arm", "2", True, ""]]
    assert (result["failed_calls"], result["lost_episodes"], result["episodes_not_matching_their_version"]) == (0, 0, 0)
    assert result["episodes_started_on_v1"] + result["episodes_started_on_v2"] == 32  # the 16 "arm" sessions x 2
    assert result["episodes_started_on_v2"] > 0 and result["step_during_swap"]["n"] > 0
    assert "target: 0 failed, 0 lost, 0 mismatched: met" in printed


def test_time_to_success_quick(tmp_path):
    """One invocation (the benchmark is minutes of worker start-ups on two cores): the three two-core
    settings, a scaled one (2 worker processes) in the rounds, and the run, on the scaled setting."""
    out = tmp_path / "tts.json"
    reference = BENCHMARKS / "reference" / "FetchPush-v4_previous_trainer_progress.csv"
    printed = benchmark("time_to_success", "--quick", "--collectors", "2", "--reference-csv", str(reference),
                        "--out", str(out), "--run-dir", str(tmp_path / "run"), cwd=tmp_path).stdout
    result = json.loads(out.read_text())
    assert "Time to success, FetchReach-v4 (eval: 10 fixed episodes per point)" in printed
    assert "collector process, overlapped updates" in printed and "one process, one learner thread" in printed
    assert result["run_label"] == "scaled" and "2 process worker(s), learner on cpu" in printed
    assert result["throughput"]["scaled"]["measured_cycles"] == 2
    assert result["throughput"]["scaled"]["collector_process_cpu"] > 0
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["config"]["collectors"] == 2

    provenance = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["command"]
    assert provenance.startswith("python benchmarks/time_to_success.py --quick ")
    assert result["env"] == "FetchReach-v4" and result["eval_episodes"] == 10 and result["thresholds"] == [0.5, 0.8, 0.9, 0.95]
    tp = result["throughput"]
    assert tp["rounds"] == 1 and tp["cycles"] == 2 and tp["cpus"] == os.cpu_count()
    assert "all-cores ceiling" in printed
    for setting in ("previous", "process", "new"):
        assert tp[setting]["measured_cycles"] == 2 and tp[setting]["env_steps_per_s"] > 0
        assert tp[setting]["optimizer_steps_per_s"] > 0 and tp[setting]["collection_cpu"] > 0
        assert tp[setting]["env_steps_over_previous"] == round(tp[setting]["env_steps_per_s"]
                                                               / tp["previous"]["env_steps_per_s"], 2)
        # The same CPU seconds per env step, on every core: never below what was measured.
        ceiling = tp[setting]["all_cores_ceiling_env_steps_per_s"]
        expected = tp[setting]["env_steps_per_s"] * os.cpu_count() / tp[setting]["total_cpu"]
        assert abs(ceiling - expected) <= 0.01 * expected + 0.2
        assert ceiling >= 0.99 * tp[setting]["env_steps_per_s"]
        assert tp[setting]["ceiling_over_previous"] == round(ceiling / tp["previous"]["env_steps_per_s"], 2)
    assert tp["previous"]["collector_process_cpu"] is None and tp["previous"]["env_steps_over_previous"] == 1.0
    assert tp["process"]["collector_process_cpu"] > 0 and tp["new"]["collector_process_cpu"] > 0

    # The run: evaluated every 5 cycles of 2 envs x 50 steps up to its 2000-step budget; each first
    # reach is the first evaluation at or above the rate.
    curve = result["curve"]
    assert [r["env_steps"] for r in curve] == [500, 1000, 1500, 2000]
    assert result["new"]["env_steps"] == 2000 and result["new"]["stopped_by"] in ("step budget", "all thresholds reached")
    for mode in ("policy", "l3p"):
        for thr in result["thresholds"]:
            hits = [r["env_steps"] for r in curve if (r.get(f"success_{mode}") or -1) >= thr]
            got = result["new"]["first_reach"][mode][str(thr)]
            assert (got and got["env_steps"]) == (hits[0] if hits else None), (mode, thr)

    # The previous trainer's curve: its shipped Push bundle's progress.csv (20 episodes a point).
    ref = result["reference"]["first_reach"]
    assert ref["policy"]["0.5"] == {"env_steps": 760000, "wall_s": 6258.3}
    assert all(ref["policy"][t] == {"env_steps": 920000, "wall_s": 7594.2} for t in ("0.8", "0.9", "0.95"))
    assert ref["l3p"]["0.5"] == {"env_steps": 920000, "wall_s": 7594.2} and ref["l3p"]["0.8"] is None

    # The table of a finished run, from its directory: its own env and episodes per evaluation
    # (not the command's defaults), the same first reaches.
    printed = benchmark("time_to_success", "--from-run", str(tmp_path / "run"), "--env", "FetchPush-v4",
                        "--eval-episodes", "50", "--out", str(tmp_path / "again.json"), cwd=tmp_path).stdout
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["env"] == "FetchReach-v4" and again["eval_episodes"] == 10
    assert again["new"]["first_reach"] == result["new"]["first_reach"] and again["new"]["env_steps"] == 2000
    assert "Time to success, FetchReach-v4 (eval: 10 fixed episodes per point)" in printed


def test_serve_latency_checks_the_serving_targets_against_its_rows(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as when run as a script: its siblings import
    serve = importlib.import_module("serve_latency")

    def row(p50_us, p99_us):
        return {"n": 100, "p50_us": p50_us, "p99_us": p99_us, "mean_us": p50_us}

    report = {
        "latency": {
            "served StartEpisode, one at a time": row(2500, 4000),
            "served StartEpisode, 32 concurrent": row(20000, 26000),  # 10.4x: not met
            "served Control (stream), keep step": row(450, 700),
            "served Control (stream), re-plan step": row(1000, 1500),
            "gRPC echo, stream ping-pong (threaded server)": row(400, 600),  # 1.125x, 1.6 ms: met
            "gRPC echo, stream ping-pong (asyncio server)": row(300, 400),  # 1.5x, 1.4 ms: not met
        },
        "concurrency": [
            {"transport": "unary Act", "sessions": 32, "actions_per_s": 2400.0, "min_actions_per_session": 300},
            {"transport": "Control streams", "sessions": 32, "actions_per_s": 6000.0, "min_actions_per_session": 900},
            {"transport": "Control streams", "sessions": 1000, "actions_per_s": 5500.0, "min_actions_per_session": 0},
        ],
    }
    checked = {r["target"]: (r["measured"], r["met"]) for r in serve.targets(report)}
    assert checked == {
        "idle StartEpisode p50 <= 5 ms": ("2.50 ms", True),
        "32 concurrent StartEpisode p99 <= 10x the idle p50": ("26.0 ms = 10.4x", False),
        "stream keep step p50 <= 1.15x the threaded echo stream p50": ("0.450 ms = 1.12x", True),
        "stream re-plan p99 <= the threaded echo stream p99 + 1 ms": ("1.50 ms against 1.60", True),
        "stream keep step p50 <= 1.15x the asyncio echo stream p50": ("0.450 ms = 1.50x", False),
        "stream re-plan p99 <= the asyncio echo stream p99 + 1 ms": ("1.50 ms against 1.40", False),
        ">= 4000 actions/s at 32 sessions (unary Act)": ("2400 actions/s", False),
        ">= 4000 actions/s at 32 sessions (Control streams)": ("6000 actions/s", True),
        "1000 Control streams open, every one served": ("least-served stream: 0 actions", False),
    }


def test_start_bursts_compares_servers_side_by_side(untrained_bundle, tmp_path):
    """Two servers of this checkout (one with --processes 2), the same code assembled from the
    checkout's folders (--against), and the echo, in alternation: every row is measured, and the
    ratio is the row's own p99 over its idle p50."""
    out = tmp_path / "bursts.json"
    printed = benchmark("start_bursts", "--bundle", str(untrained_bundle), "--server-args", "--processes 2",
                        "--against", str(ROOT), "--rounds", "1", "--concurrent", "4", "--out", str(out),
                        cwd=tmp_path).stdout
    rows = json.loads(out.read_text())
    assert [r["server"] for r in rows] == ["this checkout", str(ROOT), "this checkout, --processes 2",
                                           "asyncio echo (transport floor)"]
    for row in rows[:3]:
        assert 0 < row["p50_ms"] <= row["p99_ms"] and row["idle_p50_ms"] > 0
        assert abs(row["p99_over_idle"] - row["p99_ms"] / row["idle_p50_ms"]) < 1e-9
    assert 0 < rows[3]["p50_ms"] <= rows[3]["p99_ms"] and rows[3]["idle_p50_ms"] is None
    assert "4 concurrent StartEpisode calls, 1 rounds of 2 bursts, FetchReach-v4" in printed


def test_train_throughput_compares_worker_settings_and_devices(tmp_path):
    """A row per number of workers, relative to the first, and the update time per device."""
    out = tmp_path / "tp.json"
    printed = benchmark("train_throughput", "--env", "FetchReach-v4", "--collectors", "1", "2", "--cycles", "1",
                        "--rounds", "1", "--devices", "cpu", "--out", str(out), cwd=tmp_path).stdout
    result = json.loads(out.read_text())
    assert set(result["workers"]) == {"1", "2"} and result["workers"]["1"]["env_steps_over_first"] == 1.0
    assert all(r["env_steps_per_s"] > 0 and r["optimizer_steps_per_s"] > 0 for r in result["workers"].values())
    assert list(result["update_ms"]) == ["cpu"] and result["update_ms"]["cpu"]["256"] > 0
    assert "learner update alone (ms per optimizer step)" in printed


def _run_dir(path: Path, env_id: str, plan_eps: float, rows: list[tuple[int, float, float | None]]) -> Path:
    """A training run directory as `l3p train` leaves it: config.json and progress.csv."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"env_id": env_id, "seed": 0, "plan_eps": plan_eps,
                                                  "eval_episodes": 20}))
    lines = ["cycle,env_steps,wall_time_s,success_policy,success_l3p"]
    lines += [f"{i},{steps},{steps / 100},{pol},{'' if l3p is None else l3p}" for i, (steps, pol, l3p) in enumerate(rows)]
    (path / "progress.csv").write_text("\n".join(lines) + "\n")
    return path


def test_learning_speed_compares_runs_over_the_env_steps_both_reached(tmp_path):
    plan = _run_dir(tmp_path / "plan", "l3p/FetchPlaceInsideBox-v0", 0.5,
                    [(100, 0.0, None), (200, 0.2, 0.1), (300, 0.4, 0.6), (400, 0.8, 0.9), (500, 1.0, 1.0)])
    noplan = _run_dir(tmp_path / "noplan", "l3p/FetchPlaceInsideBox-v0", 0.0,
                      [(100, 0.0, None), (200, 0.0, 0.0), (300, 0.1, 0.2), (400, 0.5, 0.4)])
    out, png = tmp_path / "speed.json", tmp_path / "speed.png"
    printed = benchmark("learning_speed", str(plan), str(noplan), "--segments", "2", "--out", str(out),
                        "--plot", str(png), cwd=tmp_path).stdout
    result = json.loads(out.read_text())
    assert result["common_env_steps"] == 400 and result["segments"] == [0, 200, 400]  # the shorter run's end
    a, b = result["runs"]
    assert (a["label"], b["label"]) == ("plan (plan_eps 0.5)", "noplan (plan_eps 0)")
    assert a["policy"]["spans"] == [{"mean": 0.1, "evaluations": 2}, {"mean": 0.6, "evaluations": 2}]
    assert a["l3p"]["spans"] == [{"mean": 0.1, "evaluations": 1}, {"mean": 0.75, "evaluations": 2}]  # unmeasured left out
    assert a["policy"]["overall"] == {"mean": 0.35, "evaluations": 4}  # 500 lies past the common range
    assert b["policy"]["overall"] == {"mean": 0.15, "evaluations": 4}
    assert a["policy"]["first_reach"] == {"0.5": {"env_steps": 400, "wall_s": 4.0},
                                          "0.8": {"env_steps": 400, "wall_s": 4.0}, "0.9": None}
    assert b["l3p"]["first_reach"]["0.5"] is None and b["policy"]["first_reach"]["0.5"]["env_steps"] == 400
    assert (a["final_env_steps"], a["wall_s_to_common"], len(a["curve"])) == (500, 4.0, 5)
    rows = {tuple(line.split()[:4]): line.split()[4:] for line in printed.splitlines()}
    assert rows[("plan", "(plan_eps", "0.5)", "policy")] == ["0.10", "0.60", "0.35", "400", "400", "-"]
    assert rows[("noplan", "(plan_eps", "0)", "l3p")] == ["0.00", "0.30", "0.20", "-", "-", "-"]
    assert "0-200" in printed and "200-400" in printed and png.stat().st_size > 10_000

    other = _run_dir(tmp_path / "push", "FetchPush-v4", 0.5, [(100, 0.5, 0.5)])
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "learning_speed.py"), str(plan), str(other)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "the runs train different envs" in proc.stderr


# nvidia-smi's stand-in: the machine line, or a sample every 0.2 s in the real one's format, always 42 %.
FAKE_NVIDIA_SMI = """#!/usr/bin/env bash
case "$*" in
  *name,driver_version*) echo "Stand-in GPU, 0.0, 1 MiB" ;;
  *) while true; do echo "$(date '+%Y/%m/%d %H:%M:%S.%3N'), 42, 100"; sleep 0.2; done ;;
esac
"""


def test_the_gpu_check_dry_run_writes_every_part_from_outside_the_checkout(tmp_path):
    """`gpu_check.sh --dry-run` (CPU, tiny sizes) run from a folder outside the checkout: the table's
    eager rows measured and its captured rows marked as needing CUDA, the offline run to its steps
    with the clusters starting where configured, FetchPush to its budget with its evaluations, the
    GPU utilization read from nvidia-smi's lines (a stand-in printing 42 %), and one summary."""
    assert benchmark("gpu_check", "--help", cwd=tmp_path).stdout.startswith("usage: ")
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(FAKE_NVIDIA_SMI)
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(BENCHMARKS / "gpu_check.sh"), "--dry-run", "--python", sys.executable,
                           "--out", "out", "--work", "work"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "gpu_check.json", "gpu_check.log", "offline.json", "push.json", "table.json"]
    result = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert result["machine"]["gpu"] == "Stand-in GPU, 0.0, 1 MiB"
    rows = result["table"]["rows"]
    assert [(r["batch"], r["mode"]) for r in rows] == [(16, "eager"), (16, "captured"), (32, "eager"), (32, "captured")]
    for eager in rows[::2]:
        assert eager["ms_with_cluster_work"] > 0 and eager["ms_without_cluster_work"] > 0
        assert eager["parts"] == {"update": "eager", "refresh": "eager", "clusters": "eager"}
    assert all(r["note"] == "needs CUDA (device cpu)" for r in rows[1::2])
    offline = result["offline"]
    assert (offline["optimizer_steps"], offline["clusters_from_step"], offline["evaluations"]) == (60, 20, 2)
    assert offline["dataset"]["episodes"] == 10 and "--seed 3" in offline["command"]
    utilization = offline["gpu_utilization"]
    assert utilization["whole_run"]["samples"] > 0 and utilization["whole_run"]["mean_pct"] == 42.0
    # A dry run's learner cycles can all fall between two samples (one every UTIL_INTERVAL_MS).
    for span in ("before_clusters_learner_cycles", "after_clusters_learner_cycles"):
        assert utilization[span] == {"samples": 0} or utilization[span]["mean_pct"] == 42.0
    push = result["push"]
    assert "--preset-option gpu" in push["command"] and (push["device"], push["batch_size"]) == ("cpu", 32)
    assert push["env_steps"] == 400 and [r["env_steps"] for r in push["evaluations"]] == [200, 400]
    assert 0.0 <= push["final_success_policy"] <= 1.0 and push["gpu_utilization"]["mean_pct"] == 42.0
    log = (tmp_path / "out" / "gpu_check.log").read_text()
    assert "push: 400 env steps, 12 optimizer steps" in log and "(dry run)" in log
