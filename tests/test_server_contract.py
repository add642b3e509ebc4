"""The server's contract under many robots and odd clients, against the real server
process: its own thread pools, batched == sequential actions, action bounds, the unreachable
value of landmark_to_goal, starts whose answer was never delivered, subnormal temperatures,
malformed bodies, and health watches at shutdown.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from l3p.serving.local_server import LocalServer
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from l3p.core import EpisodePlanner
from l3p.serving.threads import THREAD_VARIABLES, without_thread_variables
from test_server_e2e import (
    REPO, TIMEOUT, actions, explore, initial, run_stream, run_unary, serve, wait_until,
)


def log_events(process: LocalServer) -> list[dict]:
    return [json.loads(line) for line in process.stderr_tail(400).splitlines() if line.startswith("{")]


# ------------------------------------------------------------------------------ thread pools


def test_the_server_caps_its_own_thread_pools_without_thread_variables(untrained_bundle):
    env = without_thread_variables(os.environ)  # like a user's shell (scripts/test sets some)
    assert not set(THREAD_VARIABLES) & set(env)
    with LocalServer(untrained_bundle, env=env) as process:
        # Logged before READY, but on stderr, which another thread drains: it may land just after.
        wait_until(lambda: any(e["event"] == "thread_pools" for e in log_events(process)), "the thread_pools event")
        pools = next(e for e in log_events(process) if e["event"] == "thread_pools")
        assert pools["blas_threads"] and set(pools["blas_threads"].values()) == {1}, pools
        assert pools["onnxruntime_intra_op_threads"] == 1
        assert pools["onnxruntime_inter_op_threads"] == 1
        with grpc.insecure_channel(process.target) as channel:  # and it serves
            run_unary(pb_grpc.PlannerStub(channel), seed=1, steps=3)
    # The same environment without the cap: numpy's BLAS would size its pool by the cores.
    uncapped = subprocess.run(
        [sys.executable, "-c", "import json, l3p.serving.threads as t; print(json.dumps(t.blas_pool_sizes()))"],
        env=env, cwd=REPO, capture_output=True, text=True, check=True,
    )
    if (os.cpu_count() or 1) > 1:
        assert max(json.loads(uncapped.stdout).values()) > 1


# --------------------------------------------------------------------- batching changes nothing


def test_32_sessions_batched_act_like_32_sessions_one_by_one(untrained_bundle):
    """A batch delay makes the steps of concurrent sessions share onnxruntime calls; every action
    equals the one the same episode gets alone."""
    for served in serve(untrained_bundle, "--batch-delay-us", "2000", "--max-sessions", "64"):
        episodes = [(run_unary if i % 2 else run_stream, i) for i in range(32)]

        def play(episode):
            run, seed = episode
            return actions(run(served.stub, seed=seed, options=explore(seed), steps=20)[1])

        with futures.ThreadPoolExecutor(len(episodes)) as pool:
            together = list(pool.map(play, episodes))
        model = {"model": untrained_bundle.name}  # a --bundle server's one model
        batched = {net: (served.metric("l3p_batched_steps_total", {**model, "network": net}),
                         served.metric("l3p_batches_total", {**model, "network": net}))
                   for net in ("actor", "distance")}
        alone = [play(episode) for episode in episodes]
        assert together == alone
        steps = sum(s for s, _ in batched.values())
        assert steps == 32 * 20
        assert sum(b for _, b in batched.values()) < steps  # some calls did answer several steps


# ---------------------------------------------------------------------- contract of the answers


@pytest.fixture(scope="module")
def narrow_bundle(untrained_bundle, tmp_path_factory) -> Path:
    """The untrained bundle with a +-0.01 action box (the actor overshoots it) and a graph cut
    so short (d_max 0.001, no adaptive cut) that no landmark reaches the goal."""
    bundle = Path(shutil.copytree(untrained_bundle, tmp_path_factory.mktemp("narrow") / "b"))
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["action_low"] = [-0.01] * 4
    manifest["action_high"] = [0.01] * 4
    manifest["planner"].update(d_max=0.001, adaptive_cut=False)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return bundle


def test_actions_stay_within_the_bundles_bounds(narrow_bundle):
    for served in serve(narrow_bundle):
        for run, options in ((run_unary, None), (run_stream, explore(3)),
                             (run_unary, pb.EpisodeOptions(mode=pb.PLANNER_MODE_POLICY))):
            _, responses = run(served.stub, seed=2, options=options, steps=10)
            acts = np.array(actions(responses))
            assert (np.abs(acts) <= np.float32(0.01)).all()
            assert (np.abs(acts) == np.float32(0.01)).any()  # the actor did overshoot: clipped


def test_unreachable_landmarks_answer_minus_one(narrow_bundle):
    bundle = load_bundle(narrow_bundle)
    obs, goal = initial(4)
    in_process = EpisodePlanner(bundle.landmarks, goal, bundle.value_fn, bundle.planner_defaults)
    assert np.isinf(in_process.landmark_to_goal).all()
    for served in serve(narrow_bundle):
        started = served.stub.StartEpisode(pb.StartEpisodeRequest(goal=goal), timeout=TIMEOUT)
        assert list(started.landmark_to_goal) == [-1.0] * bundle.n_landmarks
        step = served.stub.Act(pb.ActRequest(session_id=started.session_id, observation=obs),
                               timeout=TIMEOUT)
        assert step.subgoal_index == -1  # nothing reachable: the goal itself


# ------------------------------------------------------------------------------- odd clients


def test_a_start_whose_deadline_passes_leaves_no_session(untrained_bundle):
    """Deadlines of 1-5 ms on starts that each solve a new landmark block (a temperature not
    seen before, tens of ms): the deadline passes while solving, and no session is left
    behind; the server keeps serving."""
    for served in serve(untrained_bundle):
        obs, goal = initial(5)
        for i in range(20):
            request = pb.StartEpisodeRequest(goal=goal, options=pb.EpisodeOptions(temperature=1.0 + i / 100))
            try:
                started = served.stub.StartEpisode(request, timeout=0.001 + 0.0002 * i)
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            else:  # solved in time after all (a fast machine): an ordinary session
                served.stub.EndEpisode(pb.EndEpisodeRequest(session_id=started.session_id), timeout=TIMEOUT)
        wait_until(lambda: served.live_sessions() == 0, "starts without an answer to be freed")
        run_unary(served.stub, seed=5, steps=3)
        assert served.live_sessions() == 0
        assert "internal_error" not in {e["event"] for e in log_events(served.process)}


def test_a_subnormal_temperature_is_refused(untrained_bundle):
    for served in serve(untrained_bundle):
        for temperature in (5e-324, 1e-9):
            request = pb.StartEpisodeRequest(goal=initial(0)[1],
                                             options=pb.EpisodeOptions(temperature=temperature))
            with pytest.raises(grpc.RpcError) as error:
                served.stub.StartEpisode(request, timeout=TIMEOUT)
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "options.temperature must be >= 1e-06" in error.value.details()
        assert served.live_sessions() == 0


def test_a_malformed_body_is_an_invalid_argument_not_an_internal_error(untrained_bundle):
    garbage = b"\x0a\xff\xff"  # field 1, length-delimited, with a truncated length
    for served in serve(untrained_bundle):
        obs, goal = initial(6)
        bystander = served.stub.StartEpisode(pb.StartEpisodeRequest(goal=goal), timeout=TIMEOUT)
        for method, message in (("Act", "l3p.v1.ActRequest"), ("StartEpisode", "l3p.v1.StartEpisodeRequest"),
                                ("EndEpisode", "l3p.v1.EndEpisodeRequest")):
            call = served.channel.unary_unary(f"/l3p.v1.Planner/{method}")
            with pytest.raises(grpc.RpcError) as error:
                call(garbage, timeout=TIMEOUT)
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, error.value.details()
            assert f"the request body is not a valid {message} message" in error.value.details()
        stream = served.channel.stream_stream("/l3p.v1.Planner/Control")
        start = pb.ControlRequest(start=pb.StartEpisodeRequest(goal=goal)).SerializeToString()
        with pytest.raises(grpc.RpcError) as error:
            list(stream(iter([start, garbage]), timeout=TIMEOUT))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid l3p.v1.ControlRequest message" in error.value.details()

        step = served.stub.Act(pb.ActRequest(session_id=bystander.session_id, observation=obs), timeout=TIMEOUT)
        assert np.isfinite(step.action).all()  # other sessions are undisturbed
        assert served.metric("l3p_errors_total", {"code": "INVALID_ARGUMENT"}) == 4
        wait_until(lambda: served.live_sessions() == 1, "the broken stream's session to be freed")
        levels = {event["level"] for event in log_events(served.process)}
        assert "error" not in levels and not any("Traceback" in line for line in
                                                 served.process.stderr_tail(400).splitlines())


def test_an_idle_health_watch_ends_at_shutdown_instead_of_holding_it(untrained_bundle):
    check = health_pb2.HealthCheckRequest
    with LocalServer(untrained_bundle, extra_args=["--shutdown-grace", "120"]) as process:
        with grpc.insecure_channel(process.target) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(check(service="l3p.v1.Planner"), timeout=300)
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            process.proc.send_signal(signal.SIGTERM)
            # The watch sees NOT_SERVING, then the server ends it with OK (no error raised here);
            # held, it would end only when the grace ran out, cancelled.
            assert [r.status for r in watch] == [health_pb2.HealthCheckResponse.NOT_SERVING]
            assert watch.code() == grpc.StatusCode.OK
        assert process.proc.wait(timeout=60) == 0
        events = [e["event"] for e in log_events(process)]
        assert events[events.index("shutting_down"):] == ["shutting_down", "stopped"]
