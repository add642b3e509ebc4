"""Signed bundles: the exporter signs with the training side's key, ``l3p serve --trusted-keys``
loads only versions signed by a trusted key, at start and on every swap, before any graph is
opened, and says which key signed what it serves. Keys are made here; real server processes."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

pytest.importorskip("cryptography")

from l3p.core.bundle_format import bundle_digest, read_manifest  # noqa: E402
from l3p.core.signing import (  # noqa: E402
    SIGNATURE,
    TrustedKeys,
    generate_key_pair,
    load_private_key,
    public_key_of,
    sign_bundle,
)
from l3p.protos import l3p_planner_pb2 as pb  # noqa: E402
from l3p.protos import l3p_planner_pb2_grpc as pb_grpc  # noqa: E402
from l3p.serving.local_server import LocalServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 30
GOAL = [1.3, 0.75, 0.5]


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """The training side's key pair ("nightly", trusted) and an outsider's (not trusted)."""
    root = tmp_path_factory.mktemp("keys")
    nightly = generate_key_pair(root / "nightly")
    outsider = generate_key_pair(root / "outsider")
    trusted = root / "trusted_keys"
    trusted.write_text("# the training side's public keys\n" + nightly[1].read_text())
    return {"nightly": nightly[0], "outsider": outsider[0], "trusted": trusted}


@pytest.fixture(scope="module")
def signed_bundles(tmp_path_factory, keys):
    """Two versions of the FetchReach model exported with --sign-key (other seeds, other networks)."""
    from bundles import untrained_agent

    from l3p.training.export import export_bundle

    root = tmp_path_factory.mktemp("signed")
    out = []
    for seed in (0, 1):
        agent, provenance = untrained_agent(seed=seed)
        out.append(export_bundle(agent, root / f"v{seed}", provenance, sign_key=keys["nightly"]))
    return out


def admin_token(tmp_path: Path) -> tuple[Path, tuple]:
    token = "admin-" + "5" * 24
    path = tmp_path / "admin.txt"
    path.write_text(f"operator:{token}\n")
    return path, (("authorization", f"Bearer {token}"),)


def key_label(key_path: Path, name: str) -> str:
    return public_key_of(load_private_key(key_path), name).describe()


def test_export_signs_and_a_signature_covers_the_bundle_digest(signed_bundles, keys):
    bundle = signed_bundles[0]
    record = json.loads((bundle / SIGNATURE).read_text())
    digest = bundle_digest(read_manifest(bundle))
    nightly = public_key_of(load_private_key(keys["nightly"]), "nightly")
    assert (record["algorithm"], record["bundle_sha256"], record["key_sha256"]) == (
        "ed25519", digest, nightly.key_sha256)
    assert len(base64.b64decode(record["signature"])) == 64
    assert TrustedKeys.load(keys["trusted"]).names() == ["nightly"]
    assert oct(keys["nightly"].stat().st_mode & 0o777) == "0o600"  # the private key is the owner's alone


def test_only_versions_signed_by_a_trusted_key_are_served(tmp_path, signed_bundles, keys):
    root = tmp_path / "models"
    shutil.copytree(signed_bundles[0], root / "reach" / "1")
    admin, metadata = admin_token(tmp_path)
    args = ["--poll-interval", "0", "--admin-token-file", str(admin), "--trusted-keys", str(keys["trusted"])]
    nightly = key_label(keys["nightly"], "nightly")
    with LocalServer(models=root, extra_args=args, stderr_lines=100_000) as server, \
            grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        info = stub.GetModelInfo(pb.GetModelInfoRequest(model="reach"), timeout=TIMEOUT)
        assert (info.version, info.signed_by) == ("1", nightly)

        def add_version(version: str, change) -> str:
            """Copies the signed version 0 in as ``version``, changed by ``change``; the refusal."""
            directory = root / "reach" / version
            shutil.copytree(signed_bundles[0], directory)
            change(directory)
            loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=metadata).loads
            assert [(load.model, load.version, load.loaded) for load in loads] == [("reach", version, False)]
            listed = {m.info.model: m for m in stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT).models}
            assert listed["reach"].info.version == "1" and listed["reach"].last_error == loads[0].error
            assert "\n" not in loads[0].error and str(root) not in loads[0].error
            return loads[0].error

        def unsigned(d: Path) -> None:
            (d / SIGNATURE).unlink()

        def tampered_manifest(d: Path) -> None:  # a served default changed after signing
            manifest = json.loads((d / "manifest.json").read_text())
            manifest["planner"]["d_max"] += 1.0
            (d / "manifest.json").write_text(json.dumps(manifest))

        def tampered_graph(d: Path) -> None:
            (d / "actor.onnx").write_bytes((d / "actor.onnx").read_bytes()[:-1] + b"\0")

        def forged(d: Path) -> None:  # the outsider signs, claiming to be the trusted key
            record = json.loads((d / SIGNATURE).read_text())
            outsider = load_private_key(keys["outsider"])
            digest = bundle_digest(read_manifest(d))
            record["signature"] = base64.b64encode(outsider.sign(b"l3p-bundle-signature-v1:" + digest.encode())).decode()
            (d / SIGNATURE).write_text(json.dumps(record))

        def by_outsider(d: Path) -> None:
            sign_bundle(d, load_private_key(keys["outsider"]))

        assert "reach/2 is not signed (no signature.json) and --trusted-keys needs a signature by nightly" in \
            add_version("2", unsigned)
        assert "the bundle changed after it was signed; refusing to serve it" in add_version("3", tampered_manifest)
        assert "reach/4/actor.onnx: sha256" in add_version("4", tampered_graph)  # the signed digest names it
        assert "reach/5: the signature does not verify with key nightly (forged or corrupted)" in \
            add_version("5", forged)
        outsider = public_key_of(load_private_key(keys["outsider"]), "x").key_sha256[:16]
        assert f"reach/6 is signed by key sha256:{outsider}, which is not in --trusted-keys (nightly)" in \
            add_version("6", by_outsider)
        # Each refusal is logged once, with the version's full path for the operator.
        events = [json.loads(line) for line in server.stderr_tail(100_000).splitlines()]
        failed = [e for e in events if e["event"] == "model_load_failed"]
        assert [(e["version"], e["bundle"]) for e in failed] == [(v, str(root / "reach" / v)) for v in "23456"]

        # The nightly retrain: another export, signed on the training side, copied in; no pin.
        shutil.copytree(signed_bundles[1], root / "reach" / "7")
        loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=metadata).loads
        assert [(load.model, load.version, load.loaded) for load in loads] == [("reach", "7", True)]
        status = stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT).models[0]
        assert (status.info.version, status.info.signed_by, status.last_error) == ("7", nightly, "")
        assert status.info.bundle_sha256 == bundle_digest(read_manifest(signed_bundles[1]))
        started = stub.StartEpisode(pb.StartEpisodeRequest(goal=GOAL, model="reach"), timeout=TIMEOUT)
        assert started.version == "7"


def serve_once(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l3p.serving", "--port", "0", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def test_a_server_with_trusted_keys_refuses_to_start_on_an_unsigned_model(tmp_path, untrained_bundle, keys):
    root = tmp_path / "models"
    shutil.copytree(untrained_bundle, root / "reach")
    result = serve_once("--models", str(root), "--trusted-keys", str(keys["trusted"]))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("l3p serve: error: reach is not signed (no signature.json)")
    bad = tmp_path / "keys.txt"
    bad.write_text("ssh-rsa AAAA nightly\n")
    result = serve_once("--models", str(root), "--trusted-keys", str(bad))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"--trusted-keys {bad} line 1: expected 'ed25519 BASE64 NAME'" in lines[0]


def test_keygen_and_sign_commands(tmp_path, untrained_bundle):
    l3p = [sys.executable, "-m", "l3p.cli"]
    made = subprocess.run([*l3p, "keygen", "--out", str(tmp_path / "ci"), "--name", "ci-key"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "ci.pub").read_text().split()[::2] == ["ed25519", "ci-key"]
    again = subprocess.run([*l3p, "keygen", "--out", str(tmp_path / "ci")], capture_output=True, text=True,
                           timeout=60, check=False)
    assert again.returncode == 2 and again.stderr.strip() == (
        f"l3p keygen: error: {tmp_path / 'ci.key'} already exists; keys are never overwritten")
    bundle = shutil.copytree(untrained_bundle, tmp_path / "bundle")
    signed = subprocess.run([*l3p, "sign", str(bundle), "--key", str(tmp_path / "ci.key")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert signed.returncode == 0, signed.stderr
    trusted = TrustedKeys.load(tmp_path / "ci.pub")
    from l3p.core.signing import verify_bundle

    assert verify_bundle(bundle, bundle_digest(read_manifest(bundle)), trusted).name == "ci-key"
    wrong = subprocess.run([*l3p, "sign", str(bundle), "--key", str(tmp_path / "ci.pub")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1
    assert "not an unencrypted private key PEM" in wrong.stderr
