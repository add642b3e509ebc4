"""TLS, mutual TLS, bearer tokens, session ownership and bundle pinning, against real servers.

Certificates come from the shipped deploy/tls/make-certs.sh (conftest.tls_dir); the servers are
`python -m l3p.serving` subprocesses.
"""

from __future__ import annotations

import json
import queue
import secrets
import socket
import ssl
import time
import shutil
import subprocess
import sys
import http.client
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from l3p.clients.client import channel_credentials
from l3p.serving.local_server import LocalServer
from l3p.protos import l3p_planner_pb2 as pb
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc
from l3p.serving.bundle import load_bundle
from l3p.serving.logs import LOG_BURST, LOG_PER_S
from l3p.serving.security import MISSING_TOKEN, NOT_ADMIN, WRONG_TOKEN, TokenFileError, TokenTable, bearer_token
from test_server_e2e import free_port

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 20
GOAL = [1.3, 0.75, 0.5]
OBS = [0.0] * 10  # FetchReach-v4 obs_dim


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def secure_channel(port: int, tls_dir: Path, client: str | None = None) -> grpc.Channel:
    cert = key = None
    if client is not None:
        cert, key = tls_dir / f"{client}.crt", tls_dir / f"{client}.key"
    return grpc.secure_channel(f"localhost:{port}", channel_credentials(tls_dir / "ca.crt", cert, key))


def code_of(call, request, **kwargs) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as error:
        result = call(request, timeout=TIMEOUT, **kwargs)
        if isinstance(result, grpc.Call):
            list(result)
    return error.value.code(), error.value.details()


class ControlStream:
    """A Control stream driven one message at a time."""

    def __init__(self, stub, metadata=()):
        self._requests = queue.SimpleQueue()
        self.call = stub.Control(iter(self._requests.get, None), timeout=TIMEOUT, metadata=metadata)

    def start(self) -> str:
        self._requests.put(pb.ControlRequest(start=pb.StartEpisodeRequest(goal=GOAL)))
        return next(self.call).started.session_id

    def act(self) -> pb.ActResponse:
        self._requests.put(pb.ControlRequest(observation=pb.ActRequest(observation=OBS)))
        return next(self.call).action

    def close(self) -> None:
        self._requests.put(None)
        assert list(self.call) == []


# ------------------------------------------------------------------ TLS + tokens (one server)


@pytest.fixture(scope="module")
def metrics_token(tmp_path_factory):
    token = secrets.token_hex(16)
    path = tmp_path_factory.mktemp("metrics") / "scraper.txt"
    path.write_text(f"prometheus:{token}\n")
    return path, token


@pytest.fixture(scope="module")
def token_server(untrained_bundle, tls_dir, token_file, metrics_token):
    """TLS (for /metrics too), tokens, a metrics token, a pinned (matching) digest, debug logging."""
    metrics_port = free_port()
    args = ["--tls-cert", str(tls_dir / "server.crt"), "--tls-key", str(tls_dir / "server.key"),
            "--auth-token-file", str(token_file[0]), "--metrics-port", str(metrics_port),
            "--metrics-token-file", str(metrics_token[0]),
            "--bundle-sha256", load_bundle(untrained_bundle).sha256, "--log-level", "debug"]
    with LocalServer(untrained_bundle, extra_args=args, stderr_lines=100_000) as server:
        server.metrics_url = f"https://localhost:{metrics_port}/metrics"
        server.scrape = lambda token=metrics_token[1]: scrape(server.metrics_url, tls_dir, token)
        yield server


def scrape(url: str, tls_dir: Path, token: str | None) -> str:
    """GET /metrics over TLS (trusting the test CA) with an optional bearer token."""
    context = ssl.create_default_context(cafile=str(tls_dir / "ca.crt"))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    return urllib.request.urlopen(request, timeout=TIMEOUT, context=context).read().decode()


def server_events(server: LocalServer) -> list[dict]:
    """Every stderr line of the server, each of which must be one JSON object."""
    return [json.loads(line) for line in server.stderr_tail(100_000).splitlines()]


@pytest.fixture(scope="module")
def channel(token_server, tls_dir):
    with secure_channel(token_server.port, tls_dir) as channel:
        yield channel


@pytest.fixture(scope="module")
def tokens(token_file):
    return token_file[1]


def test_tls_handshake_and_plaintext_is_refused(token_server, channel, tokens, untrained_bundle):
    stub = pb_grpc.PlannerStub(channel)
    info = stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=TIMEOUT, metadata=bearer(tokens["robot-a"]))
    assert info.bundle_sha256 == load_bundle(untrained_bundle).sha256
    with grpc.insecure_channel(f"127.0.0.1:{token_server.port}") as plain:
        code, _ = code_of(pb_grpc.PlannerStub(plain).GetModelInfo, pb.GetModelInfoRequest(),
                          metadata=bearer(tokens["robot-a"]))
        assert code == grpc.StatusCode.UNAVAILABLE  # no TLS handshake, no call


def test_every_planner_rpc_needs_a_token(channel, tokens):
    stub = pb_grpc.PlannerStub(channel)
    calls = [
        (stub.GetModelInfo, lambda: pb.GetModelInfoRequest()),
        (stub.StartEpisode, lambda: pb.StartEpisodeRequest(goal=GOAL)),
        (stub.Act, lambda: pb.ActRequest(session_id="x", observation=OBS)),
        (stub.EndEpisode, lambda: pb.EndEpisodeRequest(session_id="x")),
        (stub.Control, lambda: iter([pb.ControlRequest(start=pb.StartEpisodeRequest(goal=GOAL))])),
    ]
    refusals = (((), MISSING_TOKEN),
                (bearer("not-a-token-at-all-00"), WRONG_TOKEN),
                ((("authorization", tokens["robot-a"]),), MISSING_TOKEN))  # no "Bearer" scheme
    for call, request in calls:
        for metadata, message in refusals:
            assert code_of(call, request(), metadata=metadata) == (grpc.StatusCode.UNAUTHENTICATED, message)
    # Every token of the file is accepted, the unnamed one too; the scheme is case-insensitive.
    for token in tokens.values():
        assert stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=TIMEOUT,
                                 metadata=(("authorization", f"bearer {token}"),)).env_id
    stream = ControlStream(stub, bearer(tokens["robot-b"]))
    stream.start()
    assert len(stream.act().action) == 4
    stream.close()


def test_health_is_open_and_reflection_is_off(channel):
    health = health_pb2_grpc.HealthStub(channel)
    check = health.Check(health_pb2.HealthCheckRequest(service="l3p.v1.Planner"), timeout=TIMEOUT)
    assert check.status == health_pb2.HealthCheckResponse.SERVING  # no token: load-balancer probes
    with pytest.raises(grpc.RpcError) as error:
        ProtoReflectionDescriptorDatabase(channel).get_services()
    assert error.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_tokens_appear_in_no_log_and_no_metric(token_server, channel, tokens):
    stub = pb_grpc.PlannerStub(channel)
    wrong = "wrong-" + tokens["robot-a"]
    code_of(stub.GetModelInfo, pb.GetModelInfoRequest(), metadata=bearer(wrong))
    session = stub.StartEpisode(pb.StartEpisodeRequest(goal=GOAL), timeout=TIMEOUT,
                                metadata=bearer(tokens["robot-a"])).session_id
    stub.EndEpisode(pb.EndEpisodeRequest(session_id=session), timeout=TIMEOUT, metadata=bearer(tokens["robot-a"]))
    metrics = token_server.scrape()
    log = token_server.stderr_tail(100_000)
    assert 'l3p_errors_total{code="UNAUTHENTICATED"}' in metrics
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert any(e["event"] == "request_refused" for e in events)
    assert any(e["event"] == "session_started" and e["owner"] == "token:robot-a" for e in events)
    for secret in [*tokens.values(), wrong]:
        assert secret not in log and secret not in metrics


def test_metrics_need_tls_and_the_scrapers_token(token_server, tls_dir, tokens):
    assert "l3p_sessions_live" in token_server.scrape()
    for token in (None, tokens["robot-a"], "x" * 32):  # a robot's token is not a scraper's
        with pytest.raises(urllib.error.HTTPError) as error:
            token_server.scrape(token)
        assert error.value.code == 401
    plain = token_server.metrics_url.replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        urllib.request.urlopen(plain, timeout=TIMEOUT).read()
    with pytest.raises(urllib.error.HTTPError) as error:
        scrape(token_server.metrics_url.replace("/metrics", "/other"), tls_dir, None)
    assert error.value.code == 404


def test_refused_calls_are_logged_at_a_bounded_rate(token_server, channel):
    stub = pb_grpc.PlannerStub(channel)

    def refused() -> float:
        text = token_server.scrape()
        return float(text.split('l3p_errors_total{code="UNAUTHENTICATED"} ')[1].split()[0])

    before_lines = sum(e["event"] == "request_refused" for e in server_events(token_server))
    before = refused()
    started = time.monotonic()
    for _ in range(300):
        code_of(stub.GetModelInfo, pb.GetModelInfoRequest())
    elapsed = time.monotonic() - started
    events = [e for e in server_events(token_server) if e["event"] == "request_refused"]
    lines = len(events) - before_lines
    # Every refusal is counted; the log holds at most a burst plus the steady rate.
    assert refused() - before == 300
    assert 1 <= lines <= LOG_BURST + LOG_PER_S * (elapsed + 1)
    assert sum(e.get("suppressed", 0) for e in events[before_lines:]) <= 300 - lines


def test_native_grpc_messages_are_json_lines_with_the_client_text_escaped(token_server):
    name = 'evil"name}{x'
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", token_server.port), timeout=TIMEOUT) as raw:
        try:  # gRPC core logs the server name it has no certificate for
            with context.wrap_socket(raw, server_hostname=name) as tls:
                tls.sendall(b"not http2")
        except (ssl.SSLError, OSError):
            pass
    deadline = time.monotonic() + TIMEOUT
    while not any(name in e.get("message", "") for e in server_events(token_server)):
        assert time.monotonic() < deadline, "gRPC's message never reached the JSON log"
        time.sleep(0.1)
    native = [e for e in server_events(token_server) if name in e.get("message", "")]
    assert native[0]["event"] == "native_log" and native[0]["source"].startswith("ssl_transport_security")
    assert name not in token_server.stderr_tail(100_000)  # only escaped, inside a JSON string


# ------------------------------------------------------------------------- session ownership


def test_a_session_belongs_to_the_token_that_started_it(channel, tokens):
    stub = pb_grpc.PlannerStub(channel)
    a, b = bearer(tokens["robot-a"]), bearer(tokens["robot-b"])
    session = stub.StartEpisode(pb.StartEpisodeRequest(goal=GOAL), timeout=TIMEOUT, metadata=a).session_id
    unknown = code_of(stub.Act, pb.ActRequest(session_id="f" * 32, observation=OBS), metadata=a)
    for call, request in ((stub.Act, pb.ActRequest(session_id=session, observation=OBS)),
                          (stub.EndEpisode, pb.EndEpisodeRequest(session_id=session))):
        code, message = code_of(call, request, metadata=b)
        # Exactly what an unknown id gets: no hint that the session exists.
        assert code == unknown[0] == grpc.StatusCode.NOT_FOUND
        assert message == unknown[1].replace("f" * 32, session)
    # The owner's episode was not disturbed: it steps from 0 and ends with its own count.
    assert stub.Act(pb.ActRequest(session_id=session, observation=OBS), timeout=TIMEOUT, metadata=a).step == 0
    assert stub.EndEpisode(pb.EndEpisodeRequest(session_id=session), timeout=TIMEOUT, metadata=a).steps == 1


def test_a_stream_session_belongs_to_its_stream(channel, tokens):
    stub = pb_grpc.PlannerStub(channel)
    a = bearer(tokens["robot-a"])
    stream = ControlStream(stub, a)
    session = stream.start()
    assert stream.act().step == 0
    for call, request in ((stub.Act, pb.ActRequest(session_id=session, observation=OBS)),
                          (stub.EndEpisode, pb.EndEpisodeRequest(session_id=session))):
        assert code_of(call, request, metadata=a)[0] == grpc.StatusCode.NOT_FOUND  # same principal
    assert stream.act().step == 1
    stream.close()


@pytest.fixture(scope="module")
def mtls_server(untrained_bundle, tls_dir):
    args = ["--tls-cert", str(tls_dir / "server.crt"), "--tls-key", str(tls_dir / "server.key"),
            "--tls-client-ca", str(tls_dir / "ca.crt")]
    with LocalServer(untrained_bundle, extra_args=args) as server:
        yield server


def test_mutual_tls_refuses_a_client_without_a_certificate(mtls_server, tls_dir):
    with secure_channel(mtls_server.port, tls_dir) as channel:
        code, _ = code_of(pb_grpc.PlannerStub(channel).GetModelInfo, pb.GetModelInfoRequest())
        assert code == grpc.StatusCode.UNAVAILABLE  # the handshake fails
        health = health_pb2_grpc.HealthStub(channel)
        assert code_of(health.Check, health_pb2.HealthCheckRequest())[0] == grpc.StatusCode.UNAVAILABLE


def test_under_mutual_tls_a_session_belongs_to_the_certificate(mtls_server, tls_dir):
    with secure_channel(mtls_server.port, tls_dir, "robot-a") as chan_a, \
            secure_channel(mtls_server.port, tls_dir, "robot-b") as chan_b:
        stub_a, stub_b = pb_grpc.PlannerStub(chan_a), pb_grpc.PlannerStub(chan_b)
        session = stub_a.StartEpisode(pb.StartEpisodeRequest(goal=GOAL), timeout=TIMEOUT).session_id
        act = pb.ActRequest(session_id=session, observation=OBS)
        assert code_of(stub_b.Act, act)[0] == grpc.StatusCode.NOT_FOUND
        assert code_of(stub_b.EndEpisode, pb.EndEpisodeRequest(session_id=session))[0] == grpc.StatusCode.NOT_FOUND
        assert stub_a.Act(act, timeout=TIMEOUT).step == 0
        stub_a.EndEpisode(pb.EndEpisodeRequest(session_id=session), timeout=TIMEOUT)


# ------------------------------------------------------------------ per-principal session limit


def test_a_valid_token_without_the_admin_right_is_permission_denied(untrained_bundle, token_file, tmp_path):
    """UNAUTHENTICATED only for a missing or unknown token; a robot's valid token on an
    operator's call is an authenticated caller without the right: PERMISSION_DENIED."""
    admin_token = secrets.token_hex(16)
    admin = tmp_path / "admin.txt"
    admin.write_text(f"operator:{admin_token}\n")
    args = ["--auth-token-file", str(token_file[0]), "--admin-token-file", str(admin)]
    with LocalServer(untrained_bundle, extra_args=args, stderr_lines=1000) as server, \
            grpc.insecure_channel(server.target) as plain:
        stub = pb_grpc.PlannerStub(plain)
        robot = bearer(token_file[1]["robot-a"])
        assert code_of(stub.ReloadModels, pb.ReloadModelsRequest(), metadata=robot) == (
            grpc.StatusCode.PERMISSION_DENIED, NOT_ADMIN.format(method="ReloadModels"))
        for metadata, message in (((), MISSING_TOKEN), (bearer("not-a-token-at-all-00"), WRONG_TOKEN)):
            assert code_of(stub.ReloadModels, pb.ReloadModelsRequest(), metadata=metadata) == (
                grpc.StatusCode.UNAUTHENTICATED, message)
        assert list(stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=bearer(admin_token)).loads) == []
        assert stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=TIMEOUT, metadata=robot).env_id
        refused = [e for e in server_events(server) if e["event"] == "request_refused"]
        assert [e["code"] for e in refused] == ["PERMISSION_DENIED", "UNAUTHENTICATED", "UNAUTHENTICATED"]


def test_one_principal_cannot_take_every_session(untrained_bundle, token_file):
    path, tokens = token_file
    args = ["--auth-token-file", str(path), "--max-sessions", "5", "--max-sessions-per-principal", "2"]
    with LocalServer(untrained_bundle, extra_args=args) as server, \
            grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        a, b, c = bearer(tokens["robot-a"]), bearer(tokens["robot-b"]), bearer(tokens[""])

        def start(metadata) -> str:
            return stub.StartEpisode(pb.StartEpisodeRequest(goal=GOAL), timeout=TIMEOUT,
                                     metadata=metadata).session_id

        held = [start(a), start(a)]
        code, message = code_of(stub.StartEpisode, pb.StartEpisodeRequest(goal=GOAL), metadata=a)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "2 live sessions of 'token:robot-a' (--max-sessions-per-principal)" in message
        stream = ControlStream(stub, a)  # a stream counts against the same principal
        with pytest.raises(grpc.RpcError) as error:
            stream.start()
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        others = [start(b), start(b), start(c)]  # the others are not locked out
        code, message = code_of(stub.StartEpisode, pb.StartEpisodeRequest(goal=GOAL), metadata=c)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "5 live sessions (--max-sessions)" in message
        stub.EndEpisode(pb.EndEpisodeRequest(session_id=held[0]), timeout=TIMEOUT, metadata=a)
        assert start(a)  # an ended episode frees its principal's slot
        assert len(others) == 3


# ------------------------------------------------------------------- refusals at start-up


def serve_once(bundle: Path, *args: str) -> subprocess.CompletedProcess:
    """Runs the server with arguments it must refuse; it exits without serving."""
    return subprocess.run([sys.executable, "-m", "l3p.serving", "--bundle", str(bundle), "--port", "0", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2 and "L3P_SERVER_READY" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("l3p serve: error: "), result.stderr
    return lines[0]


def test_a_bundle_that_does_not_match_the_pinned_digest_is_refused(untrained_bundle, tmp_path):
    digest = load_bundle(untrained_bundle).sha256
    # The same graphs with one served default changed: a different bundle, a different digest.
    altered = Path(shutil.copytree(untrained_bundle, tmp_path / "altered"))
    manifest = json.loads((altered / "manifest.json").read_text())
    manifest["planner"]["d_max"] += 1.0
    (altered / "manifest.json").write_text(json.dumps(manifest))
    other = load_bundle(altered).sha256
    assert other != digest
    line = one_line_error(serve_once(altered, "--bundle-sha256", digest))
    assert f"has digest {other}, not the pinned --bundle-sha256 {digest}" in line


@pytest.mark.parametrize("args, message", [
    (["--host", "0.0.0.0"], "--host 0.0.0.0 is not loopback: serve TLS (--tls-cert/--tls-key), or pass --insecure"),
    (["--tls-cert", "x.pem"], "--tls-cert and --tls-key go together"),
    (["--tls-client-ca", "ca.pem"], "--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key"),
    (["--metrics-port", "1", "--metrics-host", "0.0.0.0"],
     "--metrics-host 0.0.0.0 is not loopback: serve TLS (--tls-cert/--tls-key, used for /metrics too)"),
])
def test_unsafe_or_incomplete_options_are_refused(untrained_bundle, args, message):
    assert message in one_line_error(serve_once(untrained_bundle, *args))


@pytest.mark.parametrize("text, message", [
    ("[" * 100_000, "manifest.json: not readable JSON (nested too deeply)"),
    ('{"format": ' + "9" * 5000 + "}", "manifest.json: not readable JSON (Exceeds the limit"),
])
def test_a_hostile_manifest_is_refused_in_one_line(untrained_bundle, tmp_path, text, message):
    hostile = Path(shutil.copytree(untrained_bundle, tmp_path / "hostile"))
    (hostile / "manifest.json").write_text(text)
    assert message in one_line_error(serve_once(hostile))


def test_bad_tls_and_token_files_are_refused(untrained_bundle, tls_dir, tmp_path):
    mismatched = ["--tls-cert", str(tls_dir / "server.crt"), "--tls-key", str(tls_dir / "robot-a.key")]
    assert "KEY_VALUES_MISMATCH" in one_line_error(serve_once(untrained_bundle, *mismatched))
    short = tmp_path / "tokens.txt"
    short.write_text("robot:s3cr3t-value\n")
    line = one_line_error(serve_once(untrained_bundle, "--auth-token-file", str(short)))
    assert f"token file {short} line 1: a token must be at least 16 characters" in line
    assert "s3cr3t" not in line


def test_insecure_non_loopback_serves_with_a_warning(untrained_bundle):
    with LocalServer(untrained_bundle, host="0.0.0.0", extra_args=["--insecure"]) as server:
        with grpc.insecure_channel(server.target) as channel:
            assert pb_grpc.PlannerStub(channel).GetModelInfo(pb.GetModelInfoRequest(), timeout=TIMEOUT).env_id
        events = [json.loads(line) for line in server.stderr_tail().splitlines() if line.startswith("{")]
    assert any(e["event"] == "insecure" and e["level"] == "warning" for e in events)


# ----------------------------------------------------------------------------- token file


def test_token_file_format():
    table = TokenTable.from_lines(["# comment", "", "robot-a:" + "a" * 16, "b" * 20, "  robot-c:" + "c" * 40 + "  "])
    assert table.name_of("a" * 16) == "robot-a" and table.name_of("c" * 40) == "robot-c"
    assert table.name_of("b" * 20) == "line-4"
    assert table.name_of("a" * 17) is None and table.name_of("") is None
    for lines, message in ((["a:" + "x" * 15], "at least 16 characters"),
                           (["a:" + "x" * 16, "a:" + "y" * 16], "the name 'a' is used twice"),
                           (["bad name:" + "x" * 16], "the name must be"),
                           (["# nothing"], "holds no token")):
        with pytest.raises(TokenFileError, match=message):
            TokenTable.from_lines(lines)


def test_bearer_token_parsing():
    assert bearer_token([("authorization", "Bearer abc")]) == "abc"
    assert bearer_token([("authorization", "BEARER  abc ")]) == "abc"
    assert bearer_token([("x-other", "Bearer abc")]) is None
    assert bearer_token([("authorization", "Basic abc")]) is None
    assert bearer_token(None) is None
