"""The model repository (``l3p serve --models DIR``): its layout, model selection and the default
model, a hot swap under live episodes, failed swaps and pins, admin reloads. Real server
processes, real (untrained) bundles."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import queue
import threading
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from l3p.clients.client import NotFound, PlannerClient
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from l3p.serving.local_server import LocalServer
from l3p.core.bundle_format import DEFAULT_MAX_FILE_BYTES
from l3p.serving.bounded import LoadJammedError, run_bounded
from l3p.serving.repository import scan
from test_server_e2e import free_port, wait_until

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 20
REACH_GOAL = [1.3, 0.75, 0.5]
STEPS = 24


@pytest.fixture(scope="module")
def reach_v2(tmp_path_factory):
    """Another version of the FetchReach model: other (untrained) networks, other actions."""
    from bundles import export_untrained_bundle

    return export_untrained_bundle(tmp_path_factory.mktemp("reach_v2") / "bundle", seed=1)


@pytest.fixture(scope="module")
def admin(tmp_path_factory):
    token = "admin-" + "7" * 24
    path = tmp_path_factory.mktemp("admin") / "admin.txt"
    path.write_text(f"operator:{token}\n")
    return path, (("authorization", f"Bearer {token}"),)


@pytest.fixture(scope="module")
def repo_server(tmp_path_factory, untrained_bundle, push_bundle, admin):
    """push (unversioned) and reach/1; reloads only on ReloadModels (no watch)."""
    root = tmp_path_factory.mktemp("repository") / "models"
    shutil.copytree(push_bundle, root / "push")
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    (root / "reach" / "1" / "progress.csv").write_text("step,success\n")  # extra files are fine
    (root / "notes").mkdir()
    metrics_port = free_port()
    args = ["--poll-interval", "0", "--admin-token-file", str(admin[0]),
            "--metrics-port", str(metrics_port)]
    with LocalServer(models=root, extra_args=args, stderr_lines=100_000) as server:
        server.root = root
        server.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        with grpc.insecure_channel(server.target) as channel:
            server.stub = pb_grpc.PlannerStub(channel)
            server.channel = channel
            yield server


def metric_samples(url: str, name: str) -> dict[tuple, float]:
    text = urllib.request.urlopen(url, timeout=TIMEOUT).read().decode()
    return {tuple(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == name}


def statuses(stub) -> dict[str, pb.ModelStatus]:
    return {m.info.model: m for m in stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT).models}


def observations(seed: int, n: int = STEPS) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1.5, (n, 10)).astype(np.float32).tolist()


def write_manifest(directory: Path) -> None:
    directory.mkdir(parents=True)
    (directory / "manifest.json").write_text("{}")


def test_scan_finds_every_models_newest_version(tmp_path):
    root = tmp_path / "models"
    write_manifest(root / "arm")
    (root / "arm" / "progress.csv").write_text("")  # files beside a manifest are not models
    (root / "arm" / "landmarks.png").write_bytes(b"")
    for version in ("1", "2", "10", "2.bak", "11.disabled", "099"):
        write_manifest(root / "legs" / version)
    (root / "legs" / "12").mkdir()  # no manifest (yet): not a version
    (root / "legs" / "13").symlink_to("10")  # a link is never a version
    for version in ("alpha", "beta"):
        write_manifest(root / "base" / version)
    (root / "notes").mkdir()
    write_manifest(root / ".hidden")
    (root / "README.md").write_text("")
    found = {name: (c.version, c.path) for name, c in scan(root).items() if not c.refusal}
    assert found == {"arm": ("", root / "arm"), "legs": ("10", root / "legs" / "10")}
    assert scan(root)["legs"].notes == ("legs/099, legs/11.disabled, legs/13 (a symbolic link), legs/2.bak are not "
                                        "versions (a version is a directory named by a number without a leading "
                                        "zero, e.g. 5, never a link): never served")
    # A bundle under a name that cannot be a model's, or a model with no version, is found, refused with why.
    refused = {name: c.refusal for name, c in scan(root).items() if c.refusal}
    assert sorted(refused) == [".hidden", "base"] and "is not a model name" in refused[".hidden"]
    assert refused["base"].startswith("no version of base can serve: base/alpha, base/beta are not versions")


def test_models_are_listed_and_chosen_by_name_with_a_default(repo_server, push_bundle, untrained_bundle):
    stub = repo_server.stub
    listed = stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT)
    assert listed.default_model == "push"  # the first name in sorted order
    models = {m.info.model: m.info for m in listed.models}
    assert set(models) == {"push", "reach"}  # "notes" holds no bundle
    assert (models["reach"].version, models["reach"].bundle_sha256) == ("1", load_bundle(untrained_bundle).sha256)
    assert all(info.memory_bytes > 0 for info in models.values())

    # An old client names no model: the default.
    assert stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=TIMEOUT).env_id == "FetchPush-v4"
    old = stub.StartEpisode(pb.StartEpisodeRequest(goal=REACH_GOAL), timeout=TIMEOUT)
    assert (old.model, old.n_landmarks) == ("push", 8)
    reach = stub.StartEpisode(pb.StartEpisodeRequest(goal=REACH_GOAL, model="reach"), timeout=TIMEOUT)
    assert (reach.model, reach.version, reach.n_landmarks) == ("reach", "1", 16)
    act = stub.Act(pb.ActRequest(session_id=reach.session_id, observation=[0.1] * 10), timeout=TIMEOUT)
    assert len(act.action) == 4
    with pytest.raises(grpc.RpcError) as error:  # each session checks its own model's dims
        stub.Act(pb.ActRequest(session_id=old.session_id, observation=[0.1] * 10), timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "observation has 10 values, expected 25 (obs_dim of FetchPush-v4)" in error.value.details()
    for session in (old, reach):
        stub.EndEpisode(pb.EndEpisodeRequest(session_id=session.session_id), timeout=TIMEOUT)

    for call, request in ((stub.GetModelInfo, pb.GetModelInfoRequest(model="legs")),
                          (stub.StartEpisode, pb.StartEpisodeRequest(goal=REACH_GOAL, model="legs"))):
        with pytest.raises(grpc.RpcError) as error:
            call(request, timeout=TIMEOUT)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert "model 'legs' is not served here; models: push, reach" in error.value.details()

    # The client library: a model per client, on unary episodes and streams.
    with PlannerClient(repo_server.target, model="reach") as client:
        assert (client.model_info().env_id, client.model_info().version) == ("FetchReach-v4", "1")
        with client.stream_episode(REACH_GOAL, seed=3) as episode:
            assert len(episode.act([0.1] * 10).action) == 4
        with client.episode(REACH_GOAL) as episode:
            assert len(episode.act([0.1] * 10).action) == 4
    with PlannerClient(repo_server.target, model="legs", retry=None) as client, pytest.raises(NotFound):
        client.model_info()

    health = health_pb2_grpc.HealthStub(repo_server.channel)
    for name in ("push", "reach"):
        check = health.Check(health_pb2.HealthCheckRequest(service=f"l3p.v1.Planner/{name}"), timeout=TIMEOUT)
        assert check.status == health_pb2.HealthCheckResponse.SERVING
    steps = metric_samples(repo_server.metrics_url, "l3p_steps_total")
    assert steps[(("model", "reach"),)] == 3 and steps[(("model", "push"),)] == 0  # each model its own


class Stream:
    """A Control stream driven one message at a time."""

    def __init__(self, stub, start: pb.StartEpisodeRequest):
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self.call = stub.Control(iter(self._requests.get, None), timeout=60)
        self._requests.put(pb.ControlRequest(start=start))
        self.started = next(self.call).started

    def act(self, obs) -> list[float]:
        self._requests.put(pb.ControlRequest(observation=pb.ActRequest(observation=obs)))
        return list(next(self.call).action.action)

    def close(self) -> None:
        self._requests.put(None)
        assert list(self.call) == []


def test_a_swap_under_live_episodes_keeps_each_on_its_version(repo_server, reach_v2, admin):
    stub = repo_server.stub
    start = pb.StartEpisodeRequest(goal=REACH_GOAL, model="reach", options=pb.EpisodeOptions(seed=5))
    obs = observations(0)

    def act(session_id: str, o) -> list[float]:
        return list(stub.Act(pb.ActRequest(session_id=session_id, observation=o), timeout=TIMEOUT).action)

    # The reference: a whole episode on version 1, nothing swapped.
    ref = stub.StartEpisode(start, timeout=TIMEOUT)
    reference = [act(ref.session_id, o) for o in obs]
    stub.EndEpisode(pb.EndEpisodeRequest(session_id=ref.session_id), timeout=TIMEOUT)

    unary = stub.StartEpisode(start, timeout=TIMEOUT)
    stream = Stream(stub, start)
    assert unary.version == stream.started.version == "1"
    half = STEPS // 2
    before = [[act(unary.session_id, o) for o in obs[:half]], [stream.act(o) for o in obs[:half]]]

    shutil.copytree(reach_v2, repo_server.root / "reach" / "2")
    loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=60, metadata=admin[1]).loads
    assert [(load.model, load.version, load.loaded) for load in loads] == [("reach", "2", True)]
    status = statuses(stub)["reach"]
    assert (status.info.version, list(status.draining_versions), status.live_sessions) == ("2", ["1"], 2)
    assert status.info.bundle_sha256 == load_bundle(reach_v2).sha256

    # New episodes get version 2, whose networks answer otherwise.
    new = stub.StartEpisode(start, timeout=TIMEOUT)
    assert new.version == "2"
    assert [act(new.session_id, o) for o in obs] != reference
    stub.EndEpisode(pb.EndEpisodeRequest(session_id=new.session_id), timeout=TIMEOUT)

    # The running episodes finish on version 1: every action bit for bit the reference's.
    after = [[act(unary.session_id, o) for o in obs[half:]], [stream.act(o) for o in obs[half:]]]
    for done_before, done_after in zip(before, after):
        assert done_before + done_after == reference
    memory = metric_samples(repo_server.metrics_url, "l3p_model_memory_bytes")
    assert (("model", "reach"), ("version", "1")) in memory  # still loaded

    stub.EndEpisode(pb.EndEpisodeRequest(session_id=unary.session_id), timeout=TIMEOUT)
    assert list(statuses(stub)["reach"].draining_versions) == ["1"]  # the stream still runs on it
    stream.close()
    wait_until(lambda: not statuses(stub)["reach"].draining_versions, "version 1 to be unloaded")
    events = [json.loads(line) for line in repo_server.stderr_tail(100_000).splitlines()]
    assert any(e["event"] == "model_unloaded" and (e["model"], e["version"]) == ("reach", "1") for e in events)
    memory = metric_samples(repo_server.metrics_url, "l3p_model_memory_bytes")
    assert (("model", "reach"), ("version", "1")) not in memory
    assert (("model", "reach"), ("version", "2")) in memory


def test_a_failed_swap_leaves_the_current_version_serving(repo_server, untrained_bundle, admin):
    stub = repo_server.stub
    serving = statuses(stub)["reach"].info.version
    broken = repo_server.root / "reach" / "99"
    shutil.copytree(untrained_bundle, broken)
    (broken / "actor.onnx").write_bytes(b"tampered")
    loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=60, metadata=admin[1]).loads
    assert [(load.model, load.version, load.loaded) for load in loads] == [("reach", "99", False)]
    assert "reach/99/actor.onnx: sha256 does not match manifest.json" in loads[0].error
    assert hashlib.sha256(b"tampered").hexdigest() not in loads[0].error  # nothing of a refused file is echoed
    status = statuses(stub)["reach"]
    assert status.info.version == serving and status.last_error == loads[0].error
    started = stub.StartEpisode(pb.StartEpisodeRequest(goal=REACH_GOAL, model="reach"), timeout=TIMEOUT)
    assert started.version == serving
    stub.EndEpisode(pb.EndEpisodeRequest(session_id=started.session_id), timeout=TIMEOUT)
    # The same broken candidate is not tried again until it changes.
    assert list(stub.ReloadModels(pb.ReloadModelsRequest(), timeout=60, metadata=admin[1]).loads) == []
    shutil.rmtree(broken)


def test_a_model_whose_first_version_fails_is_listed_with_why(repo_server, untrained_bundle, admin):
    """A new model that cannot load: listed (not loaded, with the reason), refused by name with
    that reason, the others untouched; its next version loads like any new model."""
    stub = repo_server.stub
    late = repo_server.root / "late"
    shutil.copytree(untrained_bundle, late / "1")
    (late / "1" / "value.onnx").write_bytes(b"tampered")
    loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=60, metadata=admin[1]).loads
    assert [(load.model, load.version, load.loaded) for load in loads] == [("late", "1", False)]
    listed = statuses(stub)
    assert {name: m.loaded for name, m in listed.items()} == {"push": True, "reach": True, "late": False}
    assert listed["late"].last_error == loads[0].error and "value.onnx: sha256" in loads[0].error
    assert (listed["late"].info.version, listed["late"].info.env_id, listed["late"].live_sessions) == ("1", "", 0)
    with pytest.raises(grpc.RpcError) as error:
        stub.StartEpisode(pb.StartEpisodeRequest(goal=REACH_GOAL, model="late"), timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert error.value.details().startswith("model 'late' is not served: it failed to load (")
    started = stub.StartEpisode(pb.StartEpisodeRequest(goal=REACH_GOAL, model="reach"), timeout=TIMEOUT)
    stub.EndEpisode(pb.EndEpisodeRequest(session_id=started.session_id), timeout=TIMEOUT)

    shutil.copytree(untrained_bundle, late / "2")
    loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=60, metadata=admin[1]).loads
    assert [(load.model, load.version, load.loaded) for load in loads] == [("late", "2", True)]
    status = statuses(stub)["late"]
    assert status.loaded and status.info.env_id == "FetchReach-v4" and status.last_error == ""


def test_reload_needs_an_admin_token(repo_server, tmp_path, untrained_bundle):
    stub = repo_server.stub
    for metadata in ((), (("authorization", "Bearer " + "x" * 30),)):
        with pytest.raises(grpc.RpcError) as error:
            stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=metadata)
        assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # Robots need no token on this server: only the admin call does.
    assert stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=TIMEOUT).env_id

    # --bundle: a repository of one model, named after its directory; no admin file, no reload.
    with LocalServer(untrained_bundle) as server, grpc.insecure_channel(server.target) as channel:
        one = pb_grpc.PlannerStub(channel)
        listed = one.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT)
        assert listed.default_model == untrained_bundle.name
        assert [m.info.model for m in listed.models] == [untrained_bundle.name]
        with pytest.raises(grpc.RpcError) as error:
            one.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT)
        assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "--admin-token-file" in error.value.details()


def test_the_watch_refuses_a_version_the_pin_does_not_allow(tmp_path, untrained_bundle, reach_v2):
    root = tmp_path / "models"
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    pinned = load_bundle(untrained_bundle).sha256
    args = ["--poll-interval", "0.2", "--model-sha256", f"reach={pinned}"]
    with LocalServer(models=root, extra_args=args) as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        shutil.copytree(reach_v2, root / "reach" / "2")
        wait_until(lambda: statuses(stub)["reach"].last_error, "the watch to try version 2")
        status = statuses(stub)["reach"]
        assert status.info.version == "1"
        assert f"not the pinned --model-sha256 {pinned}; refusing to serve it" in status.last_error
        # A version the pin allows is swapped in by the watch alone.
        shutil.rmtree(root / "reach" / "2")
        shutil.copytree(untrained_bundle, root / "reach" / "3")
        wait_until(lambda: statuses(stub)["reach"].info.version == "3", "the watch to load version 3")
        # A model that appears is served too; one that leaves keeps serving.
        shutil.copytree(untrained_bundle, root / "arm")
        wait_until(lambda: "arm" in statuses(stub), "the watch to load the new model")
        started = stub.StartEpisode(pb.StartEpisodeRequest(goal=REACH_GOAL, model="arm"), timeout=TIMEOUT)
        assert (started.model, started.version) == ("arm", "")
        shutil.rmtree(root / "arm")
        assert stub.Act(pb.ActRequest(session_id=started.session_id, observation=[0.0] * 10), timeout=TIMEOUT).step == 0
        assert "arm" in statuses(stub)


def serve_once(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l3p.serving", "--port", "0", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


@pytest.mark.parametrize("make_args, message", [
    (lambda root, b: ["--models", str(root / "empty")], "no model bundle found"),
    (lambda root, b: ["--models", str(root / "nowhere")], "nowhere: not a directory"),
    (lambda root, b: ["--models", str(root), "--bundle-sha256", "a" * 64], "--bundle-sha256 goes with --bundle"),
    (lambda root, b: ["--models", str(root), "--default-model", "legs"], "--default-model legs: no such model"),
    (lambda root, b: ["--models", str(root), "--model-sha256", "legs=" + "a" * 64],
     "--model-sha256 names legs, which the repository does not hold"),
])
def test_a_repository_that_cannot_be_served_is_refused_in_one_line(tmp_path, untrained_bundle, make_args, message):
    root = tmp_path / "models"
    shutil.copytree(untrained_bundle, root / "reach")
    (root / "empty").mkdir()  # a directory without a bundle is no model
    result = serve_once(*make_args(root, untrained_bundle))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("l3p serve: error: "), result.stderr
    assert message in lines[0]


def reload(stub, admin) -> list[pb.ModelLoad]:
    return list(stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=admin[1]).loads)


def server_events(server: LocalServer) -> list[dict]:
    return [json.loads(line) for line in server.stderr_tail(100_000).splitlines()]


def test_a_version_copied_manifest_first_is_loaded_once_its_graphs_land(repo_server, reach_v2, admin):
    """A refused candidate is tried again once a file of it changes, not only its manifest: a
    copy that lands the manifest first loads when the graphs follow (a new version of a served
    model, and the first version of a new model)."""
    stub = repo_server.stub
    for model, version in (("reach", "60"), ("fresh", "1")):
        directory = repo_server.root / model / version
        directory.mkdir(parents=True)
        shutil.copy(reach_v2 / "manifest.json", directory)
        loads = reload(stub, admin)
        assert [(load.model, load.version, load.loaded) for load in loads] == [(model, version, False)]
        assert loads[0].error == (f"bundle {model}/{version}: actor.onnx is missing; tried again once a file of "
                                  "it changes: at the next ReloadModels after that")
        assert statuses(stub)[model].last_error == loads[0].error
        assert reload(stub, admin) == []  # unchanged: not tried again
        shutil.copy(reach_v2 / "actor.onnx", directory)
        (directory / "distance.onnx").write_bytes((reach_v2 / "distance.onnx").read_bytes()[:100])  # mid-copy
        loads = reload(stub, admin)
        assert [(load.model, load.version, load.loaded) for load in loads] == [(model, version, False)]
        assert f"{model}/{version}/distance.onnx: sha256" in loads[0].error
        for graph in ("distance.onnx", "value.onnx", "landmarks.onnx"):
            shutil.copy(reach_v2 / graph, directory)
        loads = reload(stub, admin)
        assert [(load.model, load.version, load.loaded) for load in loads] == [(model, version, True)]
        status = statuses(stub)[model]
        assert (status.loaded, status.info.version, status.last_error) == (True, version, "")
        assert status.info.bundle_sha256 == load_bundle(reach_v2).sha256


def test_reasons_clients_see_name_no_server_path(repo_server, untrained_bundle, admin):
    """GetModelInfo, ListModels and ReloadModels name the model, version and file relative to the
    repository; the server's log keeps the full path."""
    stub = repo_server.stub
    broken = repo_server.root / "broken" / "1"
    shutil.copytree(untrained_bundle, broken)
    (broken / "manifest.json").write_text("{not json")
    loads = reload(stub, admin)
    assert [(load.model, load.version, load.loaded) for load in loads] == [("broken", "1", False)]
    with pytest.raises(grpc.RpcError) as error:
        stub.GetModelInfo(pb.GetModelInfoRequest(model="broken"), timeout=TIMEOUT)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert error.value.details().startswith(
        "model 'broken' is not served: it failed to load (broken/1/manifest.json: not readable JSON")
    texts = [error.value.details(), statuses(stub)["broken"].last_error, loads[0].error]
    for text in texts:
        assert str(repo_server.root) not in text and str(repo_server.root.resolve()) not in text
        assert "pytest-" not in text
    logged = [e for e in server_events(repo_server) if e["event"] == "model_load_failed" and e["model"] == "broken"]
    assert [e["bundle"] for e in logged] == [str(broken)]
    shutil.rmtree(broken.parent)
    assert reload(stub, admin) == []
    assert "broken" not in statuses(stub)  # never served and gone: nothing left to report


def test_a_graph_file_over_the_cap_is_refused_unread(repo_server, untrained_bundle, admin):
    stub = repo_server.stub
    serving = statuses(stub)["reach"].info.version
    big = repo_server.root / "reach" / "70"
    shutil.copytree(untrained_bundle, big)
    with open(big / "actor.onnx", "r+b") as file:  # sparse: no disk, but a size no load should read
        file.truncate(DEFAULT_MAX_FILE_BYTES + 1)
    loads = reload(stub, admin)
    assert [(load.model, load.version, load.loaded) for load in loads] == [("reach", "70", False)]
    assert loads[0].error.startswith(f"reach/70/actor.onnx: {DEFAULT_MAX_FILE_BYTES + 1} bytes, over the cap of "
                                     f"{DEFAULT_MAX_FILE_BYTES} bytes per file;")
    assert statuses(stub)["reach"].info.version == serving
    shutil.rmtree(big)
    assert reload(stub, admin) == []
    assert statuses(stub)["reach"].last_error == ""  # what was refused is gone


def test_a_graph_onnxruntime_refuses_is_freed_as_the_load_fails(repo_server, untrained_bundle, admin):
    """A graph whose sha256 the manifest names that onnxruntime cannot load: nothing of a refused
    load stays allocated (its exception's traceback held the bytes until a garbage collection)."""
    stub, pid = repo_server.stub, repo_server.proc.pid
    size = 32 << 20
    digest = hashlib.sha256(bytes(size)).hexdigest()

    def refused_load(version: int) -> int:
        """The server's resident memory after version ``version``, that graph, was refused."""
        directory = repo_server.root / "reach" / str(version)
        shutil.copytree(untrained_bundle, directory)
        with open(directory / "actor.onnx", "r+b") as file:  # zeros, sparse: no disk
            file.truncate(0)
            file.truncate(size)
        edit_manifest(directory, lambda m: m["files"]["actor"].update(sha256=digest))
        loads = reload(stub, admin)
        shutil.rmtree(directory)
        assert [(load.version, load.loaded) for load in loads] == [(str(version), False)]
        assert loads[0].error.startswith(f"reach/{version}: actor.onnx: onnxruntime cannot load it")
        return memory_kb(pid, "VmRSS")

    first = refused_load(1001)  # what a first load allocates once
    growth = [refused_load(version) - first for version in range(1002, 1006)]
    assert max(growth) < 8 << 10, growth  # kB: each refused load kept its 32 MiB
    assert reload(stub, admin) == [] and statuses(stub)["reach"].last_error == ""


def test_directories_that_cannot_be_model_names_are_listed_as_refused(repo_server, untrained_bundle, admin):
    stub = repo_server.stub
    odd = ["modèle", "a b", ".hidden", "-dash", "x" * 65]
    for name in odd:
        shutil.copytree(untrained_bundle, repo_server.root / name)
    shutil.copytree(untrained_bundle, repo_server.root / "vers" / "v 1")  # a model whose only version is odd
    shown = {ascii(name)[1:-1] for name in odd}
    assert "mod\\xe8le" in shown
    loads = reload(stub, admin)
    assert sorted((load.model, load.loaded) for load in loads) == sorted((name, False) for name in shown | {"vers"})
    listed = statuses(stub)
    for name in shown:
        assert not listed[name].loaded
        assert listed[name].last_error == (f"directory '{name}' holds a bundle but is not a model name (1-64 of "
                                           "A-Z a-z 0-9 _ . -, the first a letter or digit); rename it to serve it")
    assert listed["vers"].last_error.startswith("no version of vers can serve: vers/v 1 is not a version (")
    assert reload(stub, admin) == []
    skipped = [e["model"] for e in server_events(repo_server) if e["event"] == "model_skipped"]
    assert sorted(skipped) == sorted(shown | {"vers"})  # each logged once
    for name in [*odd, "vers"]:
        shutil.rmtree(repo_server.root / name)
    reload(stub, admin)
    assert not (shown | {"vers"}) & set(statuses(stub))


def test_a_fifo_in_a_version_jams_neither_the_loader_nor_shutdown(tmp_path, untrained_bundle, reach_v2, admin):
    root = tmp_path / "models"
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    cap = max((untrained_bundle / f"{graph}.onnx").stat().st_size for graph in ("actor", "distance", "value"))
    args = ["--poll-interval", "0", "--admin-token-file", str(admin[0]), "--shutdown-grace", "2",
            "--max-file-bytes", str(cap)]
    server = LocalServer(models=root, extra_args=args, stderr_lines=100_000)
    with server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        candidate = root / "reach" / "2"
        shutil.copytree(untrained_bundle, candidate)
        (candidate / "actor.onnx").unlink()
        os.mkfifo(candidate / "actor.onnx")
        loads = reload(stub, admin)
        assert [(load.model, load.version, load.loaded) for load in loads] == [("reach", "2", False)]
        assert loads[0].error.startswith("reach/2/actor.onnx: a FIFO, not a regular file; refusing to read it")
        assert reload(stub, admin) == []  # the loader is free; the same candidate is not tried again
        (candidate / "actor.onnx").unlink()
        shutil.copy(untrained_bundle / "actor.onnx", candidate)
        assert [(load.version, load.loaded) for load in reload(stub, admin)] == [("2", True)]

        # The per-file cap is the server's option.
        over = root / "reach" / "3"
        shutil.copytree(untrained_bundle, over)
        with open(over / "value.onnx", "ab") as file:
            file.write(b"\0" * (cap + 1 - (over / "value.onnx").stat().st_size))
        loads = reload(stub, admin)
        assert loads[0].error.startswith(f"reach/3/value.onnx: {cap + 1} bytes, over the cap of {cap} bytes")

        # A FIFO left in the repository at shutdown: the server still ends within its grace.
        os.mkfifo(root / "reach" / "4")
        fifo_version = root / "reach" / "5"
        shutil.copytree(untrained_bundle, fifo_version)
        (fifo_version / "landmarks.onnx").unlink()
        os.mkfifo(fifo_version / "landmarks.onnx")
        assert [(load.version, load.loaded) for load in reload(stub, admin)] == [("5", False)]
        assert statuses(stub)["reach"].info.version == "2"
        server.proc.terminate()
        assert server.proc.wait(timeout=60) == 0  # ended by itself, not killed
    assert any(e["event"] == "stopped" for e in server_events(server))


def test_a_load_that_outlasts_its_timeout_is_reported_jammed_and_disposed_of_later():
    release = threading.Event()
    late: list = []

    async def main() -> str:
        with pytest.raises(LoadJammedError, match=r"^loading reach/9 took longer than 0.2 s \(--load-timeout\) "
                                                  r"and was abandoned"):
            await run_bounded(lambda: release.wait(60) and "version 9", 0.2, "loading reach/9", on_late=late.append)
        release.set()
        return await run_bounded(lambda: "next", 60, "loading reach/10")  # not held up behind it

    assert asyncio.run(main()) == "next"
    wait_until(lambda: late == ["version 9"], "the abandoned load's result to be disposed of")


def test_start_up_reads_the_repository_off_the_event_loop_and_a_jammed_look_stops_it(tmp_path, untrained_bundle,
                                                                                     monkeypatch):
    """At start, as on a swap, the look at the repository and each load run in threads of their own
    (the event loop's thread reads no file); a look that outlasts --load-timeout stops the start."""
    import l3p.serving.repository as repository
    from l3p.serving.candidates import ModelSpec
    from l3p.serving.server import PlannerServer

    root = tmp_path / "models"
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    readers: list[threading.Thread] = []
    release = threading.Event()
    load_bundle = repository.load_bundle

    def watched_load(*args, **kwargs):
        readers.append(threading.current_thread())
        return load_bundle(*args, **kwargs)

    monkeypatch.setattr(repository, "load_bundle", watched_load)

    class Watched(ModelSpec):
        def sources(self):
            readers.append(threading.current_thread())
            if self.load_timeout_s < 1:
                release.wait(60)
            return super().sources()

    async def main() -> str:
        server = PlannerServer(Watched(root=root))
        await server.start()
        version = server.models.get("reach").version
        await server.stop(None)
        await server.wait_for_termination()
        with pytest.raises(LoadJammedError, match=r"^looking at the repository took longer than 0.2 s"):
            await PlannerServer(Watched(root=root, load_timeout_s=0.2)).open()
        release.set()
        return version

    assert asyncio.run(main()) == "1"
    assert len(readers) == 3 and all(t is not threading.main_thread() and t.name == "l3p-load" for t in readers)


def test_a_look_at_the_repository_that_fails_unexpectedly_is_logged_and_reload_answers(caplog):
    """Whatever a look raises, ReloadModels gets an answer (no load), never INTERNAL; the log has why."""
    from l3p.serving.repository import Repository

    def sources():
        raise RuntimeError("a bug in the look")

    repository = Repository(sources, {}, make_engine=lambda bundle, name: None)
    with caplog.at_level(logging.ERROR, logger="l3p.serving"):
        assert asyncio.run(repository.refresh()) == []
    failed = [r for r in caplog.records if r.getMessage() == "repository_look_failed"]
    assert len(failed) == 1 and failed[0].exc_info[0] is RuntimeError


RULE = "(a version is a directory named by a number without a leading zero, e.g. 5, never a link): never served"


def repository_server(root: Path, admin, *args: str) -> LocalServer:
    """A server of ``root`` that looks at it only on ReloadModels."""
    return LocalServer(models=root, extra_args=["--poll-interval", "0", "--admin-token-file", str(admin[0]), *args],
                       stderr_lines=100_000)


def test_reload_models_reaches_every_process(tmp_path, untrained_bundle, reach_v2, admin):
    """--processes 2 without a watch: after one ReloadModels, which one process answers, every new
    connection, whichever process takes it, is served the new version."""
    root = tmp_path / "models"
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    with repository_server(root, admin, "--processes", "2") as server:
        shutil.copytree(reach_v2, root / "reach" / "2")
        with grpc.insecure_channel(server.target) as channel:
            assert [(load.version, load.loaded) for load in reload(pb_grpc.PlannerStub(channel), admin)] == [
                ("2", True)]
        versions = []
        for _ in range(16):  # SO_REUSEPORT hashes them over both processes (p > 1 - 2**-15)
            # A local subchannel pool: a channel of its own makes a connection of its own.
            with grpc.insecure_channel(server.target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
                stub = pb_grpc.PlannerStub(channel)
                versions.append(stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=TIMEOUT).version)
                versions.append(stub.StartEpisode(pb.StartEpisodeRequest(goal=REACH_GOAL), timeout=TIMEOUT).version)
    assert versions == ["2"] * 32


def test_only_numbers_are_versions_and_anything_else_never_serves_nor_blocks(tmp_path, untrained_bundle, reach_v2,
                                                                             admin):
    """`mv 4 4.disabled` stops version 4 serving; a stray `2.bak` neither serves nor blocks a new
    5; ListModels names each, on one line."""
    root = tmp_path / "models"
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    shutil.copytree(reach_v2, root / "reach" / "4")
    with repository_server(root, admin) as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        assert statuses(stub)["reach"].info.version == "4"
        (root / "reach" / "4").rename(root / "reach" / "4.disabled")
        assert [(load.version, load.loaded) for load in reload(stub, admin)] == [("1", True)]
        status = statuses(stub)["reach"]
        assert (status.info.version, status.info.bundle_sha256) == ("1", load_bundle(untrained_bundle).sha256)
        assert status.last_error == f"reach/4.disabled is not a version {RULE}"

        shutil.copytree(reach_v2, root / "reach" / "2.bak")
        assert reload(stub, admin) == []
        assert statuses(stub)["reach"].info.version == "1"
        shutil.copytree(reach_v2, root / "reach" / "5")
        assert [(load.version, load.loaded) for load in reload(stub, admin)] == [("5", True)]
        status = statuses(stub)["reach"]
        assert status.info.version == "5"
        assert status.last_error == f"reach/2.bak, reach/4.disabled are not versions {RULE}"
        started = stub.StartEpisode(pb.StartEpisodeRequest(goal=REACH_GOAL, model="reach"), timeout=TIMEOUT)
        assert started.version == "5"
    noted = [e for e in server_events(server) if e["event"] == "not_versions"]
    assert [e["note"] for e in noted] == [f"reach/4.disabled is not a version {RULE}",
                                          f"reach/2.bak, reach/4.disabled are not versions {RULE}"]


def edit_manifest(directory: Path, edit) -> None:
    manifest = json.loads((directory / "manifest.json").read_text())
    edit(manifest)
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_links_are_never_followed_and_strings_from_files_are_escaped(tmp_path, untrained_bundle, reach_v2, admin):
    """Symbolic and hard links; what a refused file holds is never echoed, what a listing names is escaped."""
    root, outside = tmp_path / "models", tmp_path / "outside"
    shutil.copytree(reach_v2, outside / "bundle")
    (outside / "other.json").write_text(json.dumps({"format": "\x1b[2Jowned\nsecond line"}))
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    with repository_server(root, admin) as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        # A version, or a model, that is a link to a good bundle outside the repository.
        (root / "reach" / "9").symlink_to(outside / "bundle", target_is_directory=True)
        (root / "linked").symlink_to(outside / "bundle", target_is_directory=True)
        loads = reload(stub, admin)
        assert [(load.model, load.version, load.loaded) for load in loads] == [("linked", "", False)]
        assert loads[0].error == ("linked is a symbolic link, which is never followed; copy the model's directory "
                                  "in to serve it")
        status = statuses(stub)["reach"]
        assert (status.info.version, status.last_error) == ("1", f"reach/9 (a symbolic link) is not a version {RULE}")

        def refused(version: str, change) -> str:
            directory = root / "reach" / version
            shutil.copytree(reach_v2, directory)
            change(directory)
            loads = reload(stub, admin)
            assert [(load.version, load.loaded) for load in loads] == [(version, False)]
            assert statuses(stub)["reach"].info.version == "1"
            shutil.rmtree(directory)
            return loads[0].error

        def link(name: str, target: Path):
            return lambda d: ((d / name).unlink(), (d / name).symlink_to(target))

        # A manifest that is a link to any JSON file is refused before it is read.
        error = refused("10", link("manifest.json", outside / "other.json"))
        assert error.startswith("reach/10/manifest.json: a symbolic link, which is never followed; refusing to read it")
        assert "owned" not in error
        # So is one that is another name (a hard link) of a file elsewhere, and what a refused
        # manifest holds is never echoed: ListModels is for robots too.
        (outside / "secret.json").write_text(json.dumps({"format": "the-secret"}))

        def hard_link(d: Path) -> None:
            (d / "manifest.json").unlink()
            os.link(outside / "secret.json", d / "manifest.json")

        errors = [refused("13", hard_link), refused("14", lambda d: edit_manifest(d, lambda m: m.update(
            format="the-secret")))]
        assert errors[0].startswith("reach/13/manifest.json: a file with 2 hard links, which is never read (another "
                                    "of its names may be a file outside the bundle): copy the file in;")
        assert errors[1].startswith("reach/14/manifest.json: 'format' is not 'l3p-bundle';")
        assert not any("secret" in text for text in errors)
        # A graph that is a link, even to the very bytes the manifest names.
        error = refused("11", link("actor.onnx", outside / "bundle" / "actor.onnx"))
        assert error.startswith("reach/11/actor.onnx: a symbolic link, which is never followed; refusing to read it")
        # A graph path from the manifest, with a terminal escape and a line break, is escaped.
        error = refused("12", lambda d: edit_manifest(d, lambda m: m["files"]["actor"].update(path="\x1b[2J\nx.onnx")))
        assert error.startswith("bundle reach/12: \\x1b[2J\\nx.onnx is missing")
        # A directory name read from the repository is escaped too.
        shutil.copytree(reach_v2, root / "reach" / "7\x1b]0;title\x07")
        reload(stub, admin)
        last_error = statuses(stub)["reach"].last_error
        assert "reach/7\\x1b]0;title\\x07" in last_error
        for text in (last_error, *(e.get("error", "") for e in server_events(server))):
            assert "\x1b" not in text and "\n" not in text


def test_a_version_swapped_for_a_link_while_it_is_looked_at_never_breaks_reload(tmp_path, untrained_bundle, admin):
    """Version 2 flips between a (broken) directory and a link to itself while ReloadModels runs:
    every answer is OK, every refusal one line."""
    root, aside = tmp_path / "models", tmp_path / "aside"
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    shutil.copytree(untrained_bundle, aside)
    (aside / "actor.onnx").write_bytes(b"tampered")
    version = root / "reach" / "2"
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(aside, version)
            os.rename(version, aside)
            os.symlink("2", version)  # a link to itself: a loop
            os.unlink(version)

    with repository_server(root, admin) as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        swapper = threading.Thread(target=swap, daemon=True)
        swapper.start()
        try:
            errors = [load.error for _ in range(150) for load in reload(stub, admin)]
        finally:
            stop.set()
            swapper.join()
        assert all(error.startswith(("reach/2", "bundle reach/2")) and "\n" not in error for error in errors)
        assert statuses(stub)["reach"].info.version == "1"


def memory_kb(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith(field + ":")))


def test_a_graph_is_hashed_as_it_streams_so_one_that_does_not_match_is_never_held(tmp_path, untrained_bundle,
                                                                                   admin):
    root = tmp_path / "models"
    shutil.copytree(untrained_bundle, root / "reach" / "1")
    with repository_server(root, admin) as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        big = root / "reach" / "2"
        shutil.copytree(untrained_bundle, big)
        size = 96 << 20  # under the default cap; sparse, so it costs no disk
        with open(big / "actor.onnx", "r+b") as file:
            file.truncate(size)
        pid = server.proc.pid
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak resident memory starts again from now
        before = memory_kb(pid, "VmRSS")
        loads = reload(stub, admin)
        assert [(load.version, load.loaded) for load in loads] == [("2", False)]
        assert loads[0].error.startswith("reach/2/actor.onnx: sha256 does not match manifest.json")
        # A copy of the file read whole would be 96 MiB.
        assert memory_kb(pid, "VmHWM") - before < 24 << 10
