"""Unit tests of serving/: the bundle loader, the session store, and the servicer's error model;
and, against real server processes, one server per port.

End-to-end tests against the real server process are in test_server_e2e.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import onnxruntime as ort
import pytest
from prometheus_client.parser import text_string_to_metric_families

from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.core import EPISODE_OPTIONS, OPTIONS, PlannerConfig
from l3p.core.commandline import ConfigError, parse_config
from l3p.core.errors import USAGE
from l3p.serving.config import DEFAULT_BATCH_DELAY_US, ServeConfig
from l3p.serving.bundle import BundleError, bundle_digest, load_bundle, session_options
from l3p.serving.logs import JsonFormatter, RateLimit
from l3p.serving.mapping import episode_config
from l3p.serving.errors import InvalidRequestError
from l3p.serving.local_server import LocalServer, ServerStartError
from l3p.serving.server import PlannerServer
from l3p.protos.mapping import MODE_ENUM
from option_values import example, exclusions
from l3p.serving.sessions import Owner, SessionLimitError, SessionNotFoundError, SessionStore

# ---------------------------------------------------------------------------- bundle loader


@pytest.fixture
def bundle_copy(untrained_bundle, tmp_path) -> Path:
    """A scratch copy of the untrained bundle that a test may break."""
    return Path(shutil.copytree(untrained_bundle, tmp_path / "bundle"))


def edit_manifest(bundle: Path, edit) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    edit(manifest)
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def test_loads_a_valid_bundle(untrained_bundle):
    manifest = json.loads((untrained_bundle / "manifest.json").read_text())
    bundle = load_bundle(untrained_bundle)

    assert bundle.env_id == manifest["env_id"] == "FetchReach-v4"
    assert (bundle.obs_dim, bundle.goal_dim, bundle.action_dim) == (10, 3, 4)
    assert bundle.landmarks.shape == (manifest["n_landmarks"], 3)
    assert bundle.landmarks.dtype == np.float32 and np.isfinite(bundle.landmarks).all()
    assert bundle.planner_defaults == PlannerConfig(**manifest["planner"])
    assert bundle.sha256 == bundle_digest(manifest)
    assert list(bundle.action_low) == manifest["action_low"]

    # The planner_api.md callables: one batched call each, with the documented shapes.
    n = bundle.n_landmarks + 1
    obs = np.zeros((n, bundle.obs_dim), np.float32)
    goals = np.concatenate([bundle.landmarks, bundle.landmarks[:1]])
    distance, action = bundle.distance_fn(obs, goals)
    assert distance.shape == (n,) and action.shape == (n, bundle.action_dim)
    np.testing.assert_allclose(bundle.policy_fn(obs, goals), action, atol=1e-6)
    assert bundle.value_fn(goals, goals[::-1]).shape == (n,)


def test_sessions_are_tuned_for_latency():
    options = session_options()
    assert options.intra_op_num_threads == 1
    assert options.inter_op_num_threads == 1
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL


def _set(path: str, value):
    def edit(manifest):
        *parents, key = path.split(".")
        node = manifest
        for parent in parents:
            node = node[parent]
        node[key] = value

    return edit


@pytest.mark.parametrize(
    "edit, message",
    [
        (_set("format", "secret-format"), "manifest.json: 'format' is not 'l3p-bundle'"),
        (_set("format_version", 2), "'format_version' is not 1 (the version this server reads)"),
        (_set("dims.obs", "secret-ten"), "'dims.obs' is not a positive integer"),
        (_set("action_low", [-1, -1]), "'action_low' is not a list of 4 finite numbers (dims.action)"),
        (_set("gamma", 1.5), "'gamma' is not a number in (0, 1)"),
        (_set("planner.d_max", -1), "'planner.d_max' is not a finite number > 0"),
        (_set("planner.temperature", 1e-9), "'planner.temperature' is not >= 1e-06 (smaller values underflow"),
        (_set("planner.secret_beam", 3), "'planner' holds a name that is no planner option (mode, d_max, "),
        (lambda m: m["planner"].update(next_hop=True, follow_edges=True),
         "'planner' serves follow_edges beside next_hop=true, which makes it do nothing; rebundle it without: "
         "l3p export BUNDLE OUT --planner follow_edges=false"),
        (_set("files.value", "secret-entry"), "'files.value' is not {\"path\": ..., \"sha256\": ...}"),
        (_set("files.actor.path", "../actor.onnx"), "leaves the bundle directory"),
        # dims that disagree with the graphs: the signature check names the graph and input
        (_set("dims.obs", 11), "actor.onnx: input 'obs' is not tensor(float) ['B', 11] (B: a dynamic batch axis)"),
        (_set("n_landmarks", 17), "output 'landmarks' is not tensor(float) [17, 3]"),
    ],
)
def test_refuses_a_bad_manifest(bundle_copy, edit, message):
    """The message names the field and what it must be, never the value found (clients read it)."""
    edit_manifest(bundle_copy, edit)
    with pytest.raises(BundleError) as error:
        load_bundle(bundle_copy)
    assert message in str(error.value) and "secret" not in str(error.value)


def test_refuses_a_graph_with_another_signature(bundle_copy):
    # The value graph listed (with its correct digest) as the actor: names do not match.
    edit_manifest(bundle_copy, lambda m: m["files"].__setitem__("actor", m["files"]["value"]))
    with pytest.raises(BundleError) as error:
        load_bundle(bundle_copy)
    assert "value.onnx: inputs are not ['obs', 'goal']" in str(error.value)


def test_refuses_missing_manifest_or_file(bundle_copy, tmp_path):
    (bundle_copy / "distance.onnx").unlink()
    with pytest.raises(BundleError, match=r"distance\.onnx is missing"):
        load_bundle(bundle_copy)
    (bundle_copy / "manifest.json").unlink()
    with pytest.raises(BundleError, match=r"manifest\.json is missing"):
        load_bundle(bundle_copy)
    with pytest.raises(BundleError, match="not a directory"):
        load_bundle(tmp_path / "nowhere")
    (bundle_copy / "manifest.json").write_text("{not json")
    with pytest.raises(BundleError, match="not readable JSON"):
        load_bundle(bundle_copy)


def test_refuses_a_checksum_mismatch(bundle_copy):
    with open(bundle_copy / "value.onnx", "ab") as file:
        file.write(b"\0")
    with pytest.raises(BundleError, match=r"value\.onnx: sha256 does not match manifest\.json \([0-9a-f]{64}\)$"):
        load_bundle(bundle_copy)


def test_the_pinned_digest_is_checked_before_any_graph_is_opened(bundle_copy):
    pinned = load_bundle(bundle_copy).sha256
    # An actor onnxruntime cannot parse, with its sha256 updated in the manifest: only the pin can
    # refuse it before onnxruntime reads it.
    (bundle_copy / "actor.onnx").write_bytes(b"not an onnx graph")
    edit_manifest(bundle_copy, lambda m: m["files"]["actor"].update(
        sha256=hashlib.sha256(b"not an onnx graph").hexdigest()))
    with pytest.raises(BundleError, match="actor.onnx: onnxruntime cannot load it"):
        load_bundle(bundle_copy)
    with pytest.raises(BundleError, match=f"has digest [0-9a-f]{{64}}, not the pinned --bundle-sha256 {pinned}"):
        load_bundle(bundle_copy, pinned)


def test_refuses_a_file_onnxruntime_cannot_load(bundle_copy):
    import hashlib

    garbage = b"not an onnx model"
    (bundle_copy / "actor.onnx").write_bytes(garbage)
    digest = hashlib.sha256(garbage).hexdigest()
    edit_manifest(bundle_copy, _set("files.actor.sha256", digest))
    with pytest.raises(BundleError, match=r"actor\.onnx: onnxruntime cannot load it"):
        load_bundle(bundle_copy)


# ---------------------------------------------------------------------------- session store


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_store_add_get_pop():
    store = SessionStore(ttl_s=10, max_sessions=4, clock=FakeClock())
    session = store.add("planner")
    assert store.get(session.id) is session and session.planner == "planner"
    assert len(store) == 1
    assert store.pop(session.id) is session
    with pytest.raises(SessionNotFoundError, match="unknown, ended, or idle for more than 10 s"):
        store.get(session.id)
    with pytest.raises(SessionNotFoundError):
        store.pop(session.id)
    assert store.discard(session.id) is None  # a stream's cleanup after EndEpisode: no error


def test_store_expires_idle_sessions():
    clock = FakeClock()
    expired = []
    store = SessionStore(ttl_s=10, max_sessions=4, on_expire=expired.append, clock=clock)
    idle, busy = store.add("idle"), store.add("busy")
    clock.now += 6
    store.get(busy.id)  # use refreshes the idle timer
    clock.now += 6
    assert store.expire() == [idle] and expired == [idle]
    assert store.get(busy.id) is busy
    clock.now += 10.5
    with pytest.raises(SessionNotFoundError):  # expiry is checked on access, not only by sweeps
        store.get(busy.id)
    assert expired == [idle, busy] and len(store) == 0


def test_store_limits_live_sessions():
    clock = FakeClock()
    store = SessionStore(ttl_s=10, max_sessions=2, clock=clock)
    first = store.add("a")
    store.add("b")
    with pytest.raises(SessionLimitError, match="2 live sessions .--max-sessions."):
        store.add("c")
    with pytest.raises(SessionLimitError):  # the server asks before it solves a graph
        store.check_capacity()
    store.pop(first.id)
    store.add("c")
    clock.now += 11  # expired sessions do not count against the limit
    store.add("d")
    assert len(store) == 1


def test_store_reaper_expires_in_the_background():
    clock = FakeClock()
    store = SessionStore(ttl_s=1, max_sessions=4, clock=clock)
    store.add("x")

    async def reap() -> asyncio.Task:
        reaper = asyncio.create_task(store.reap(0.01))
        clock.now += 2
        for _ in range(500):
            if len(store) == 0:
                break
            await asyncio.sleep(0.01)
        reaper.cancel()
        await asyncio.gather(reaper, return_exceptions=True)
        return reaper

    reaper = asyncio.run(reap())
    assert len(store) == 0 and reaper.cancelled()


def test_store_limits_each_principals_sessions():
    store = SessionStore(ttl_s=10, max_sessions=5, clock=FakeClock(), per_principal=2)
    a, b = Owner("token:a"), Owner("token:b")
    first = store.add("p", a)
    store.add("p", Owner.of_stream("token:a"))  # a stream counts for its principal
    with pytest.raises(SessionLimitError, match="2 live sessions of 'token:a' "
                                                r"\(--max-sessions-per-principal\)"):
        store.add("p", a)
    store.add("p", b)
    store.add("p", b)
    store.add("p", Owner("token:c"))
    with pytest.raises(SessionLimitError, match=r"5 live sessions \(--max-sessions\)"):
        store.add("p", Owner("token:d"))
    store.pop(first.id, a)  # an ended episode frees its principal's slot
    assert (store.count("token:a"), store.count("token:b")) == (1, 2)
    store.add("p", a)
    assert len(store) == 5 and store.count("token:a") == 2


def test_rate_limited_log_lines_count_what_they_left_out():
    clock = FakeClock()
    limit = RateLimit(burst=3, per_s=2.0, clock=clock)
    assert [limit.allow("refused") for _ in range(5)] == [0, 0, 0, None, None]
    assert limit.allow("other") == 0  # each event has its own bucket
    clock.now += 0.5  # one token back
    assert [limit.allow("refused"), limit.allow("refused")] == [2, None]
    clock.now += 100  # refills up to the burst, no more
    assert [limit.allow("refused") for _ in range(4)] == [1, 0, 0, None]


def test_store_is_thread_safe():
    store = SessionStore(ttl_s=60, max_sessions=10_000)
    ids, errors = [], []

    def churn():
        try:
            for _ in range(300):
                session = store.add(None)
                ids.append(session.id)
                assert store.get(session.id) is session
                store.pop(session.id)
        except Exception as exc:  # surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(store) == 0 and len(set(ids)) == 8 * 300


# ---------------------------------------------------------------------- servicer, in process


class Exploding:
    """Stands in for an onnxruntime session whose run fails: a bug, not a bad request."""

    def run(self, *args, **kwargs):
        raise RuntimeError("boom: a bug deep inside inference")


def test_a_handler_bug_answers_internal_not_unknown(untrained_bundle, caplog):
    caplog.set_level(logging.INFO, logger="l3p.serving")
    bundle = dataclasses.replace(load_bundle(untrained_bundle), distance=Exploding())
    goal = bundle.landmarks[0].tolist()
    obs = [0.0] * bundle.obs_dim

    async def drive(server: PlannerServer) -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = pb_grpc.PlannerStub(channel)
            started = await stub.StartEpisode(pb.StartEpisodeRequest(goal=goal), timeout=10)
            with pytest.raises(grpc.RpcError) as error:  # the first step re-plans: distance.onnx
                await stub.Act(pb.ActRequest(session_id=started.session_id, observation=obs), timeout=10)
            assert error.value.code() == grpc.StatusCode.INTERNAL
            assert error.value.details() == "internal error in Act; see server log"

            stream = stub.Control(
                iter([pb.ControlRequest(start=pb.StartEpisodeRequest(goal=goal)),
                      pb.ControlRequest(observation=pb.ActRequest(observation=obs))]),
                timeout=10,
            )
            with pytest.raises(grpc.RpcError) as error:
                [response async for response in stream]
            assert error.value.code() == grpc.StatusCode.INTERNAL

            # Other sessions and methods are unaffected.
            info = await stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
            assert info.obs_dim == 10

    async def run() -> PlannerServer:
        server = PlannerServer(bundle)
        await server.start()
        try:
            await drive(server)
        finally:
            await server.stop(None)
            await server.wait_for_termination()
        return server

    server = asyncio.run(run())
    sample = server.metrics.registry.get_sample_value
    assert sample("l3p_errors_total", {"code": "INTERNAL"}) == 2
    # The log has what the client was not told: the bug's traceback, once per call.
    bugs = [r for r in caplog.records if r.getMessage() == "internal_error"]
    assert [r.fields["method"] for r in bugs] == ["Act", "Control"]
    assert all(r.levelno == logging.ERROR and r.exc_info[0] is RuntimeError for r in bugs)
    assert "boom: a bug deep inside inference" in JsonFormatter().format(bugs[0])


# ------------------------------------------------------------------- proto <-> planner options


def test_episode_options_are_the_per_episode_planner_options():
    """One of each name: the proto's EpisodeOptions carries exactly the core's per-episode options
    (plus mode and seed), so the server reads every one of them."""
    assert set(pb.EpisodeOptions.DESCRIPTOR.fields_by_name) == {"mode", "seed", *EPISODE_OPTIONS}


def test_episode_config_from_options():
    defaults = PlannerConfig()
    assert episode_config(pb.EpisodeOptions(), defaults) == (defaults, None)
    options = pb.EpisodeOptions(mode=pb.PLANNER_MODE_L3P, search=pb.SEARCH_KIND_HARD, d_max=12.5,
                                temperature=3.0, local_horizon=0.0, sample_subgoal=True,
                                prune_failed=True, require_progress=True, seed=7)
    config, seed = episode_config(options, defaults)
    assert seed == 7
    assert config == defaults.replace(mode="l3p", search="hard", d_max=12.5, temperature=3.0,
                                      local_horizon=0.0, sample_subgoal=True, prune_failed=True,
                                      require_progress=True)
    # An option that does nothing in the episode's mode is refused like any option that does not apply.
    for name in EPISODE_OPTIONS:
        row, value = OPTIONS[name], example(name)
        for mode in {"l3p", "naive", "policy"} - set(row.modes):
            with pytest.raises(InvalidRequestError, match=f"options.{name} applies to mode {' or '.join(row.modes)} "
                                                          f"only, not {mode}"):
                episode_config(pb.EpisodeOptions(mode=MODE_ENUM[mode], **{name: value}), defaults)
    assert episode_config(pb.EpisodeOptions(mode=pb.PLANNER_MODE_NAIVE, prune_failed=False),
                          defaults)[0].mode == "naive"
    with pytest.raises(InvalidRequestError, match="prune_failed applies to mode l3p only, not policy"):
        episode_config(pb.EpisodeOptions(prune_failed=True), defaults.replace(mode="policy"))
    with pytest.raises(InvalidRequestError, match="options.mode is 9, not a known PlannerMode; expected "
                       "one of PLANNER_MODE_L3P, PLANNER_MODE_NAIVE, PLANNER_MODE_POLICY"):
        episode_config(pb.EpisodeOptions(mode=9), defaults)
    with pytest.raises(InvalidRequestError, match="options.d_max must be"):
        episode_config(pb.EpisodeOptions(d_max=-1.0), defaults)


def test_episode_config_refuses_a_setting_that_does_nothing():
    """A request's option that another one (the request's or the bundle's) makes do nothing is
    INVALID_ARGUMENT with one line naming both; the request's next_hop turns the bundle's off."""
    for on, dead in exclusions():
        if dead not in EPISODE_OPTIONS:
            continue
        with pytest.raises(InvalidRequestError, match=f"^options.{on}=true makes {dead} do nothing; drop one$"):
            episode_config(pb.EpisodeOptions(**{on: True, dead: example(dead)}), PlannerConfig())
        with pytest.raises(InvalidRequestError, match=f"^options.{on}=true makes {dead} do nothing; drop one "
                                                      rf"\({on}=true is a default here"):
            episode_config(pb.EpisodeOptions(**{dead: example(dead)}), PlannerConfig(**{on: True}))
    counter = PlannerConfig(prune_failed=True, follow_edges=True, prune_loops=True, local_cut=0.5)
    config, _ = episode_config(pb.EpisodeOptions(next_hop=True), counter)
    assert config.next_hop and not (config.prune_failed or config.follow_edges or config.prune_loops)
    naive, _ = episode_config(pb.EpisodeOptions(mode=pb.PLANNER_MODE_NAIVE, local_cut=0.7), PlannerConfig(next_hop=True))
    assert naive.local_cut == 0.7  # next_hop does nothing in naive: local_cut acts there


def test_json_log_lines():
    formatter = JsonFormatter()
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        record = logging.getLogger("t").makeRecord(
            "t", logging.ERROR, __file__, 1, "internal_error", None, sys.exc_info(),
            extra={"fields": {"method": "Act", "session": "abc"}},
        )
    line = formatter.format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["event"] == "internal_error" and entry["level"] == "error"
    assert entry["method"] == "Act" and "ValueError: bad\nthing" in entry["traceback"]


def test_serve_arguments():
    """The command line is read into a ServeConfig with the defaults it declares once; bad values
    are usage errors naming the option."""
    config = parse_config(ServeConfig, ["--bundle", "b"])
    assert (config.host, config.port, config.session_ttl, config.max_sessions, config.batch_delay_us) == (
        "127.0.0.1", 50051, 300.0, 1024, DEFAULT_BATCH_DELAY_US,
    )
    assert config.metrics_port == 0 and config.bundle == Path("b") and config.model_sha256 == ()
    for bad in (["--port", "70000"], ["--max-sessions", "0"], ["--session-ttl", "-1"],
                ["--batch-delay-us", "-5"]):
        with pytest.raises(SystemExit):
            parse_config(ServeConfig, ["--bundle", "b", *bad])
    with pytest.raises(ConfigError, match="give --models DIR or --bundle DIR"):
        parse_config(ServeConfig, [])


# ---------------------------------------------------------------------------- one server per port

TWO = ("--processes", "2")


def free_ports(n: int) -> int:
    """The first of n consecutive ports free now (for --metrics-port with --processes n)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            first = sock.getsockname()[1]
        if first + n > 65536:
            continue
        try:
            for port in range(first, first + n):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue


def busy_port_error(port: int, option: str = "--port", host: str = "127.0.0.1") -> str:
    return (f"l3p serve: error: cannot bind {host}:{port} ({option}): address already in use "
            f"(another server holds it: stop that one or choose another {option})\n")


def refused(bundle: Path, port: int, extra_args=(), **server_args) -> LocalServer:
    """A server started on ``port`` that must exit before it serves (stopped if it does serve)."""
    server = LocalServer(bundle, port=port, extra_args=extra_args, stderr_lines=200, **server_args).start()
    try:
        with pytest.raises(ServerStartError):
            server.wait_ready()
    finally:
        server.stop()
    return server


def start_on_a_new_connection(target: str) -> str:
    """GetModelInfo and StartEpisode on a connection of their own; the model that answered."""
    # A local subchannel pool: a channel of its own makes a connection of its own.
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = pb_grpc.PlannerStub(channel)
        info = stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=30)
        stub.StartEpisode(pb.StartEpisodeRequest(goal=[0.0] * info.goal_dim), timeout=30)
        return info.model


def sessions_started(metrics_port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples if sample.name == "l3p_sessions_started_total")


@pytest.mark.parametrize("first, second", [((), ()), ((), TWO), (TWO, ()), (TWO, TWO)],
                         ids=["one-one", "one-processes", "processes-one", "processes-processes"])
def test_a_second_server_on_a_busy_port_is_refused_and_the_first_keeps_every_connection(
        untrained_bundle, tmp_path, first, second):
    """The second server, one process or many, exits with one line before it serves; every new
    connection still reaches the first server (a second model is what the second would serve)."""
    other = shutil.copytree(untrained_bundle, tmp_path / "other-model")
    with LocalServer(untrained_bundle, extra_args=first) as server:
        intruder = refused(other, server.port, second)
        assert intruder.proc.returncode == USAGE
        assert intruder.stderr_tail(200) == busy_port_error(server.port)
        models = [start_on_a_new_connection(server.target) for _ in range(6)]
    assert models == [untrained_bundle.name] * 6


# Makes localhost name both loopback addresses in the server (as most hosts files do; this machine's may
# name 127.0.0.1 only). The server's bind check resolves names in Python; gRPC resolves them itself.
BOTH_LOOPBACKS = """import socket

_getaddrinfo = socket.getaddrinfo


def getaddrinfo(host, *args, **kwargs):
    if host == "localhost":
        return _getaddrinfo("127.0.0.1", *args, **kwargs) + _getaddrinfo("::1", *args, **kwargs)
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = getaddrinfo
"""


def test_a_host_naming_several_addresses_is_refused_if_any_is_busy(untrained_bundle, tmp_path):
    """--host localhost (127.0.0.1 and ::1) beside a server on [::1] of that port: refused in one
    line, one process or many, though 127.0.0.1 is free."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(BOTH_LOOPBACKS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))}
    with LocalServer(untrained_bundle, host="::1") as server:
        for extra_args in ((), TWO):
            intruder = refused(untrained_bundle, server.port, extra_args, host="localhost", env=env)
            assert intruder.proc.returncode == USAGE
            assert intruder.stderr_tail(200) == busy_port_error(server.port, host="localhost")


def test_processes_share_their_port_and_refuse_a_later_server(untrained_bundle, tmp_path):
    """--processes 2 on --port 0: both processes take connections; a later server on that port,
    and one on its metrics ports, are refused."""
    metrics_port = free_ports(2)
    with LocalServer(untrained_bundle, extra_args=[*TWO, "--metrics-port", str(metrics_port)]) as server:
        assert refused(untrained_bundle, server.port).proc.returncode == USAGE
        models = {start_on_a_new_connection(server.target) for _ in range(16)}
        started = [sessions_started(metrics_port + i) for i in range(2)]
        other = refused(untrained_bundle, 0, ["--metrics-port", str(metrics_port + 1)])
    assert models == {untrained_bundle.name}
    # SO_REUSEPORT hashes connections over the processes: both get some of 16 (p > 1 - 2**-15).
    assert sum(started) == 16 and min(started) > 0, started
    assert other.proc.returncode == USAGE
    assert other.stderr_tail(200) == busy_port_error(metrics_port + 1, "--metrics-port")


@pytest.mark.parametrize("metrics_port, processes", [(65535, 2), (65534, 3)])
def test_metrics_ports_past_65535_are_refused_in_one_line(untrained_bundle, metrics_port, processes):
    """With --processes N process i serves metrics on PORT+i: a PORT too near the top is a usage
    error before any process starts, whichever door the command comes through."""
    argv = ["--bundle", str(untrained_bundle), "--port", "0", "--metrics-port", str(metrics_port),
            "--processes", str(processes)]
    for entry in (["-m", "l3p", "serve"], ["-m", "l3p.serving"]):
        result = subprocess.run([sys.executable, *entry, *argv], capture_output=True, text=True, timeout=120,
                                check=False)
        assert (result.returncode, result.stdout) == (USAGE, ""), result.stderr
        assert result.stderr == (
            f"l3p serve: error: --metrics-port {metrics_port} with --processes {processes} needs ports "
            f"{metrics_port}-{metrics_port + processes - 1} (process i serves PORT+i), past 65535: choose a "
            f"--metrics-port <= {65536 - processes}\n")


def time_wait_addresses() -> set[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) of the IPv4 connections in TIME_WAIT."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return {fields[1] for fields in (row.split() for row in rows) if fields[3] == "06"}


def test_a_port_whose_last_connections_wait_in_time_wait_is_free(untrained_bundle):
    """A server restarted on its port while the connections it closed are in TIME_WAIT starts,
    one process or many."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server's side closes first: its end of the connection waits
        client.recv(1)
        client.close()
    assert f"0100007F:{port:04X}" in time_wait_addresses()
    for extra_args in (TWO, ()):
        with LocalServer(untrained_bundle, port=port, extra_args=extra_args) as server:
            assert server.port == port
