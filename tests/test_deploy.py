"""Scale-out, for real: `--processes 2` on one port, and two replicas behind nginx (the shipped
deploy/nginx/l3p.conf) with TLS and tokens, a replica killed mid-episode and a rolling update.

Robots are threads driving the stand-in world of test_server_e2e through the client library with
resume=True, the way `l3p run` does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import threading
import urllib.request
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

import nginx_proxy
from l3p.clients.client import PlannerClient, RetryPolicy, channel_credentials
from l3p.serving.local_server import LocalServer
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from test_server_e2e import actions, advance, explore, free_port, initial, run_stream, run_unary, wait_until

TIMEOUT = 20


def metric(port: int, name: str, ca: Path | None = None) -> float:
    """A sample of /metrics; over TLS trusting ``ca`` for a server with a certificate."""
    if ca is None:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=TIMEOUT).read().decode()
    else:
        context = ssl.create_default_context(cafile=str(ca))
        text = urllib.request.urlopen(f"https://localhost:{port}/metrics", timeout=TIMEOUT,
                                      context=context).read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise KeyError(name)


def log_events(server: LocalServer, event: str) -> list[dict]:
    lines = server.stderr_tail(1000).splitlines()
    return [e for e in (json.loads(line) for line in lines if line.startswith("{")) if e["event"] == event]


# --------------------------------------------------------------------------- --processes


def test_two_processes_serve_16_robots_like_one(untrained_bundle):
    """Same episodes, same actions; both processes take robots; SIGTERM stops both."""
    episodes = [(run_stream if i % 2 else run_unary, i) for i in range(16)]

    def play(target: str, episode) -> list:
        run, seed = episode
        # One connection per robot, as on robots (channels in one process share connections).
        with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
            return actions(run(pb_grpc.PlannerStub(channel), seed=seed, options=explore(seed), steps=20)[1])

    metrics_port = free_port()
    with LocalServer(untrained_bundle) as one, \
            LocalServer(untrained_bundle, extra_args=["--processes", "2", "--metrics-port", str(metrics_port)],
                        stderr_lines=1000) as two:
        with futures.ThreadPoolExecutor(16) as pool:
            single = list(pool.map(lambda e: play(one.target, e), episodes))
            double = list(pool.map(lambda e: play(two.target, e), episodes))
        started = [metric(metrics_port + i, "l3p_sessions_started_total") for i in range(2)]
        two.proc.send_signal(signal.SIGTERM)
        assert two.proc.wait(timeout=30) == 0
        wait_until(lambda: len({e["pid"] for e in log_events(two, "stopped")}) == 2, "both processes' stop")
    assert double == single
    # SO_REUSEPORT hashes connections over the processes: both get some of 16 (p > 1 - 2**-15).
    assert sum(started) == 16 and min(started) > 0, started


def test_when_one_process_dies_the_server_stops_for_its_supervisor(untrained_bundle):
    with LocalServer(untrained_bundle, extra_args=["--processes", "2"], stderr_lines=1000) as server:
        # stderr is read by its own thread: the line may trail the READY line on stdout.
        wait_until(lambda: log_events(server, "serving_processes"), "the parent's serving line")
        pids = log_events(server, "serving_processes")[0]["pids"]
        os.kill(pids[0], signal.SIGKILL)
        assert server.proc.wait(timeout=30) == 1
    (exited,) = log_events(server, "worker_exited")
    assert (exited["worker_pid"], exited["exit_code"]) == (pids[0], -signal.SIGKILL)
    assert not Path(f"/proc/{pids[1]}").exists()  # stopped and reaped before the server exited


# ---------------------------------------------------------------------- replicas behind nginx

STEPS = 40  # per episode
ROBOTS = 16
KILL_AT = 10  # the step of the first episode at which replica r1 is killed


@dataclass
class EpisodeLog:
    robot: int
    index: int
    stream: bool
    served: list[tuple[str, int, bool]] = field(default_factory=list)  # (session id, server step, resumed)
    resumes: int = 0

    def sessions(self) -> list[str]:
        return list(dict.fromkeys(session for session, _, _ in self.served))


class Robot:
    """One robot: its own client through the proxy; unary episodes or one stream per episode."""

    def __init__(self, index: int, target: str, tls_dir: Path, token: str):
        self.index = index
        self.stream = index % 4 < 2  # robots 0,1 stream, 2,3 unary, ...: both kinds on both replicas
        self.client = PlannerClient(
            target, timeout_s=TIMEOUT, credentials=channel_credentials(tls_dir / "ca.crt"), token=token,
            retry=RetryPolicy(max_attempts=20, initial_backoff_s=0.1, max_backoff_s=0.5))
        self.episodes: list[EpisodeLog] = []
        self.current: str | None = None  # session id of the episode in progress

    def episode(self, before_start=None, at_step=None) -> EpisodeLog:
        index = len(self.episodes)
        obs, goal = initial(1000 * self.index + index)
        open_episode = self.client.stream_episode if self.stream else self.client.episode
        episode = open_episode(goal, resume=True)
        if before_start is not None:
            with before_start(self.index):
                episode.start()
        log = EpisodeLog(self.index, index, self.stream)
        with episode:
            for t in range(STEPS):
                if at_step is not None:
                    self.current = episode.session_id
                    at_step(t)
                step = episode.act(obs)
                log.served.append((episode.session_id, step.step, step.resumed))
                obs = advance(obs, step.action)
        log.resumes = episode.resumes
        self.episodes.append(log)
        return log


class Turns:
    """Lets robots start their first episode one at a time, in order: nginx's round robin then
    alternates them over the two replicas deterministically."""

    def __init__(self):
        self._next = 0
        self._changed = threading.Condition()

    def __call__(self, robot: int):
        turns = self

        class Turn:
            def __enter__(self):
                with turns._changed:
                    turns._changed.wait_for(lambda: turns._next == robot, timeout=TIMEOUT)

            def __exit__(self, *exc):
                with turns._changed:
                    turns._next += 1
                    turns._changed.notify_all()

        return Turn()


def check_episode(log: EpisodeLog) -> None:
    """Every observation got one action; each session's server steps run 0, 1, ...; the session
    changes exactly at the resumed steps, where the new one starts at 0 (its re-plan). (A resume
    at the first step leaves no trace of the lost session: it never answered.)"""
    assert len(log.served) == STEPS
    for session in log.sessions():
        steps = [step for s, step, _ in log.served if s == session]
        assert steps == list(range(len(steps))), (log.robot, log.index, session, steps)
    for (before, _, _), (session, step, resumed) in zip(log.served, log.served[1:]):
        assert (session != before) == resumed and (step == 0 or not resumed)
    assert sum(resumed for _, _, resumed in log.served) == log.resumes


@pytest.fixture
def deployment(tmp_path, untrained_bundle, tls_dir, token_file):
    reason = nginx_proxy.unavailable()
    if reason:
        pytest.skip(reason)
    certs = tmp_path / "tls"
    shutil.copytree(tls_dir, certs)
    shutil.copy(certs / "server.crt", certs / "proxy.crt")
    shutil.copy(certs / "server.key", certs / "proxy.key")

    ports = (free_port(), free_port())
    metrics = (free_port(), free_port())

    def replica(i: int, bundle: Path) -> LocalServer:
        args = ["--port", str(ports[i]), "--replica-id", f"r{i + 1}", "--metrics-port", str(metrics[i]),
                "--tls-cert", str(certs / "server.crt"), "--tls-key", str(certs / "server.key"),
                "--auth-token-file", str(token_file[0]), "--shutdown-grace", "5"]
        return LocalServer(bundle, extra_args=args).start()

    replicas = [replica(0, untrained_bundle), replica(1, untrained_bundle)]
    for server in replicas:
        server.wait_ready()
    proxy = nginx_proxy.Nginx(tmp_path / "nginx", ports, free_port(), certs)
    proxy.check()
    proxy.start()
    deployment = {"replicas": replicas, "replica": replica, "metrics": metrics, "proxy": proxy, "certs": certs}
    try:
        yield deployment
    finally:
        proxy.stop()
        for server in deployment["replicas"]:
            server.stop()


def test_replicas_behind_nginx_survive_a_kill_and_a_rolling_update(deployment, untrained_bundle, token_file, tmp_path):
    tokens = token_file[1]
    replicas, metrics = deployment["replicas"], deployment["metrics"]
    ca = deployment["certs"] / "ca.crt"  # the replicas serve /metrics over TLS too
    target = f"localhost:{deployment['proxy'].port}"
    robots = [Robot(i, target, deployment["certs"], tokens["robot-a" if i % 2 else "robot-b"])
              for i in range(ROBOTS)]

    # -- phase 1: two episodes per robot; r1 is SIGKILLed while every robot is at step KILL_AT
    # of its first episode.
    at_kill = threading.Barrier(ROBOTS + 1)
    killed = threading.Event()
    turns = Turns()

    def first_two(robot: Robot) -> None:
        def at_step(t: int) -> None:
            if t == KILL_AT:
                at_kill.wait(TIMEOUT)
                killed.wait(TIMEOUT)

        robot.episode(before_start=turns, at_step=at_step)
        robot.episode()

    with futures.ThreadPoolExecutor(ROBOTS) as pool:
        running = [pool.submit(first_two, robot) for robot in robots]
        at_kill.wait(TIMEOUT)
        on_r1 = {robot.index for robot in robots if robot.current.startswith("r1.")}
        replicas[0].proc.kill()
        replicas[0].proc.wait()
        killed.set()
        for result in running:
            result.result()

    # Round robin put both kinds of robot on both replicas.
    assert {robots[i].stream for i in on_r1} == {True, False}
    assert 0 < len(on_r1) < ROBOTS
    for robot in robots:
        first, second = robot.episodes
        check_episode(first)
        check_episode(second)
        if robot.index in on_r1:  # resumed once, right at the kill, on the survivor
            assert first.resumes == 1 and first.served[KILL_AT][2]
            assert first.sessions()[1].startswith("r2.")
        else:  # the survivor's sessions were untouched
            assert first.resumes == 0 and first.sessions()[0].startswith("r2.")
        assert second.resumes == 0
    # The survivor answered each observation it got exactly once, and holds no leftover session.
    served_by_r2 = sum(s.startswith("r2.") for robot in robots for e in robot.episodes for s, _, _ in e.served)
    assert metric(metrics[1], "l3p_steps_total", ca) == served_by_r2
    assert metric(metrics[1], "l3p_sessions_live", ca) == 0
    phase1 = [e for robot in robots for e in robot.episodes]
    print(f"\nfailover: {len(phase1)} episodes, {sum(e.resumes for e in phase1)} resumes "
          f"({len(on_r1)} robots on the killed replica), lost steps "
          f"{ROBOTS * 2 * STEPS - sum(len(e.served) for e in phase1)}")

    # -- phase 2: rolling update to another bundle while robots keep running episodes.
    other = Path(shutil.copytree(untrained_bundle, tmp_path / "bundle-b"))
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["planner"]["local_horizon"] = 5.0
    (other / "manifest.json").write_text(json.dumps(manifest))
    old_digest, new_digest = load_bundle(untrained_bundle).sha256, load_bundle(other).sha256
    assert old_digest != new_digest

    stop = threading.Event()

    def keep_running(robot: Robot) -> None:
        while not stop.is_set():
            robot.episode()

    with futures.ThreadPoolExecutor(ROBOTS) as pool:
        running = [pool.submit(keep_running, robot) for robot in robots]
        for i in (0, 1):  # r1 is down since the kill: its "restart" is this start
            if i == 1:
                replicas[1].proc.send_signal(signal.SIGTERM)  # drains: streams finish, others resume
                assert replicas[1].proc.wait(timeout=30) == 0
            replicas[i] = deployment["replica"](i, other)
            replicas[i].wait_ready()
            wait_until(lambda: metric(metrics[i], "l3p_steps_total", ca) >= 100,
                       f"replica r{i + 1} on the new bundle to serve robots")
        stop.set()
        for result in running:
            result.result()

    phase2 = [e for robot in robots for e in robot.episodes[2:]]
    for log in phase2:
        check_episode(log)
    for robot in robots:
        assert [e.index for e in robot.episodes] == list(range(len(robot.episodes)))  # each counted once
    with PlannerClient(target, credentials=channel_credentials(deployment["certs"] / "ca.crt"),
                       token=tokens["robot-a"]) as client:
        assert {client.model_info().bundle_sha256 for _ in range(4)} == {new_digest}
    print(f"rolling update: {len(phase2)} episodes, {sum(e.resumes for e in phase2)} resumes, "
          f"lost steps {len(phase2) * STEPS - sum(len(e.served) for e in phase2)}")
    for robot in robots:
        robot.client.close()
