"""The package as users install it: the wheel holds one top-level name, and each install profile
(the robot client, `[serve]`, `[sim]`) works alone in a fresh venv, outside the repository.

Installs go through pip's index and its cache; one venv per profile for the whole module."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("apps", "core", "protos", "sim", "training", "serving", "clients", "datasets")
BUNDLE = ROOT / "models" / "FetchPush-v4"
# Installed from a wheel file: the hint installs the extra from that wheel, and says the checkout's form.
HINT = (r"l3p {command}: error: needs the '{extra}' extra \(missing module '[\w.]+'\): pip install "
        r"'/\S+/l3p_service-[\w.]+-py3-none-any\.whl\[{extra}\]' \(the wheel this install came from; "
        r"in a checkout: pip install -e '\.\[{extra}\]'\)\n")

pytestmark = pytest.mark.slow


def run(*args, cwd: Path, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env, **kwargs)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the sources, so the build leaves nothing in the checkout."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    proc = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out, src,
               cwd=src)
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("l3p_service-*.whl")
    return built


@pytest.fixture(scope="module")
def profiles(wheel, tmp_path_factory) -> dict[str, Path]:
    """A fresh venv (no system site-packages) per profile, each with the wheel and one extra."""
    root = tmp_path_factory.mktemp("venvs")

    def make(profile: str, spec: str) -> Path:
        venv = root / profile
        proc = run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=root)
        assert proc.returncode == 0, proc.stderr
        proc = run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q",
                   "--disable-pip-version-check", f"{wheel}{spec}", cwd=root)
        assert proc.returncode == 0, proc.stderr
        return venv / "bin"

    specs = {"base": "", "serve": "[serve]", "sim": "[sim]", "plot": "[serve,sim]", "datasets": "[datasets]"}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # installs wait on disk as much as CPU
        futures = {profile: pool.submit(make, profile, spec) for profile, spec in specs.items()}
        return {profile: future.result() for profile, future in futures.items()}


def installed(bin_dir: Path, module: str, cwd: Path) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return run(bin_dir / "python", "-c", code, cwd=cwd).returncode == 0


def test_the_wheel_installs_one_top_level_name(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"l3p"}
    for module in ("l3p/__main__.py", "l3p/cli.py", "l3p/core/__init__.py", "l3p/protos/l3p_planner.proto",
                   "l3p/protos/l3p_planner_pb2.py", "l3p/serving/args.py", "l3p/clients/client.py",
                   "l3p/sim/__init__.py", "l3p/sim/box.py", "l3p/sim/assets/fetch_box.xml", "l3p/training/commands.py"):
        assert module in names, module
    assert not any(name.startswith(("l3p/tests", "l3p/benchmarks")) for name in names)


def test_the_base_install_is_the_robot_client(profiles, tmp_path):
    bin_dir = profiles["base"]
    for absent in ("torch", "gymnasium", "onnxruntime", "mujoco"):
        assert not installed(bin_dir, absent, tmp_path), absent
    proc = run(bin_dir / "l3p", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert all(name in proc.stdout for name in ("train", "export", "serve", "run", "eval", "plot", "demo"))
    proc = run(bin_dir / "l3p", "serve", "--port", "1", "--bundle", "x", cwd=tmp_path)
    assert proc.returncode == 2 and re.fullmatch(HINT.format(command="serve", extra="serve"), proc.stderr), \
        proc.stderr
    proc = run(bin_dir / "l3p", "run", "--episodes", "1", cwd=tmp_path)
    assert proc.returncode == 2 and re.fullmatch(HINT.format(command="run", extra="sim"), proc.stderr), proc.stderr
    # What a server serves, from the robot's computer: the base install asks (here, no server answers).
    proc = run(bin_dir / "l3p", "models", "--server", "127.0.0.1:1", "--timeout", "1", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("l3p models: error: cannot reach the planner server"), \
        proc.stderr
    proc = run(bin_dir / "l3p", "run", "--help", cwd=tmp_path)  # the options, and what is missing
    assert proc.returncode == 0 and proc.stdout.startswith("usage: l3p run ") and "--episodes N" in proc.stdout
    assert "this install cannot run it: it needs the 'sim' extra" in " ".join(proc.stdout.split())
    for cwd in (tmp_path, ROOT):  # the checkout root too: no folder there shadows the installed package
        proc = run(bin_dir / "python", "-c", "from l3p.clients.client import PlannerClient, Unavailable", cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        proc = run(bin_dir / "python", "-m", "l3p", "--help", cwd=cwd)
        assert proc.returncode == 0 and "serve" in proc.stdout, proc.stderr


def test_the_datasets_install_imports_recordings_without_torch_sim_or_ros(profiles, tmp_path):
    import yaml

    sys.path.insert(0, str(ROOT / "tests"))
    from test_datasets import bag_mapping, source_arrays, write_bag

    bin_dir = profiles["datasets"]
    for absent in ("torch", "gymnasium", "mujoco", "rclpy", "onnxruntime"):
        assert not installed(bin_dir, absent, tmp_path), absent
    obs, actions, goals = source_arrays()
    write_bag(tmp_path / "bag", obs, actions, goals)
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(bag_mapping()))
    proc = run(bin_dir / "l3p", "dataset", "import", "rosbag2", "bag", "--mapping", "m.yaml", "--out", "b.npz",
               cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("wrote b.npz: 60 steps in 3 episodes"), proc.stderr
    proc = run(bin_dir / "l3p", "dataset", "pointmaze-large-stitch-v0", "--episodes", "1", cwd=tmp_path)
    assert proc.returncode == 2 and "needs the 'sim' extra" in proc.stderr, proc.stderr
    # the base install reads the project's own .npz, and names the extra for a bag
    proc = run(profiles["base"] / "l3p", "dataset", "import", "npz", "b.npz", "--out", "c.npz", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = run(profiles["base"] / "l3p", "dataset", "import", "rosbag2", "bag", "--mapping", "m.yaml", "--out", "d.npz",
               cwd=tmp_path)
    assert proc.returncode == 2 and "needs the 'datasets' extra" in proc.stderr and not (tmp_path / "d.npz").exists()


def test_the_sim_install_runs_episodes_but_does_not_serve(profiles, tmp_path):
    bin_dir = profiles["sim"]
    assert not installed(bin_dir, "onnxruntime", tmp_path) and not installed(bin_dir, "torch", tmp_path)
    proc = run(bin_dir / "l3p", "run", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: l3p run "), proc.stderr
    proc = run(bin_dir / "l3p", "serve", "--port", "1", cwd=tmp_path)
    assert proc.returncode == 2 and re.fullmatch(HINT.format(command="serve", extra="serve"), proc.stderr), \
        proc.stderr
    # Our own scenes come with the wheel (the scene XML is package data).
    code = ("from l3p.sim.envs import make_env; env = make_env('l3p/FetchPlaceInsideBoxTest-v0'); "
            "print(env.reset(seed=0)[0]['desired_goal'].round(3).tolist())")
    proc = run(bin_dir / "python", "-c", code, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "[1.25, 0.53, 0.435]", proc.stderr[-2000:]


CHECK = """
import sys
import grpc
from l3p.clients.client import PlannerClient

target = sys.argv[1]
with grpc.insecure_channel(target) as channel:
    # grpc.health.v1.Health/Check: an empty HealthCheckRequest; SERVING is status 1 (field 1).
    check = channel.unary_unary("/grpc.health.v1.Health/Check")
    print("health", check(b"", timeout=10).hex())
client = PlannerClient(target)
print("env_id", client.model_info().env_id)
client.close()
"""


def test_the_serve_install_serves_a_shipped_bundle_to_the_base_client(profiles, tmp_path):
    bin_dir = profiles["serve"]
    assert not installed(bin_dir, "torch", tmp_path) and not installed(bin_dir, "gymnasium", tmp_path)
    proc = run(bin_dir / "l3p", "serve", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: l3p serve "), proc.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    server = subprocess.Popen([str(bin_dir / "l3p"), "serve", "--bundle", str(BUNDLE), "--port", "0"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready = server.stdout.readline()
        match = re.match(r"L3P_SERVER_READY port=(\d+)", ready)
        assert match, (ready, server.stderr.read() if server.poll() is not None else "")
        proc = run(profiles["base"] / "python", "-c", CHECK, f"127.0.0.1:{match.group(1)}", cwd=tmp_path,
                   timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == ["health 0801", "env_id FetchPush-v4"]
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert server.returncode == 0, server.stderr.read()


@pytest.mark.parametrize("cwd", ["/", str(ROOT)])
def test_the_editable_install_works_from_any_directory(cwd):
    code = "import l3p.core, l3p.cli, l3p.protos.l3p_planner_pb2; print(l3p.core.__file__)"
    proc = run(sys.executable, "-c", code, cwd=Path(cwd))
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == ROOT / "core" / "__init__.py"


def test_l3p_plot_runs_from_the_checkout_root_with_the_extras_it_needs(profiles, tmp_path):
    """A maze episode through a child server started from the checkout root: neither process
    imports the root's folders (the installed package is the one that runs)."""
    bin_dir = profiles["plot"]
    out = tmp_path / "maze.png"
    proc = run(bin_dir / "l3p", "plot", "--bundle", "models/PointMaze_Large-v3", "--out", out, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.match(rf"wrote {re.escape(str(out))} \((success|failure), \d+ steps", proc.stdout), proc.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
