"""Signed bundles: the exporter signs with the training side's key, for a model, with a sequence;
``l3p serve --trusted-keys`` loads only versions signed by a trusted key for the model it serves
them as, never one signed before a version it has served (across restarts, until ``l3p
rollback``), at start and on every swap, before any graph is opened, and says which key signed
what it serves. Keys are made here; real server processes, each keeping its served sequences in
the test's own state directory."""

from __future__ import annotations

import base64
import json
import os
import re
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
    signing_time,
    verify_bundle,
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
    """Two versions of the model "reach" (FetchReach) exported with --sign-key, the second signed
    later (other seeds, other networks)."""
    from bundles import untrained_agent

    from l3p.training.export import export_bundle

    root = tmp_path_factory.mktemp("signed")
    out = []
    for seed in (0, 1):
        agent, provenance = untrained_agent(seed=seed)
        out.append(export_bundle(agent, root / f"v{seed}", provenance, sign_key=keys["nightly"], sign_model="reach"))
    return out


def state_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose served-sequences file is the test's own."""
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def signed_sequence(bundle: Path) -> int:
    return json.loads((bundle / SIGNATURE).read_text())["sequence"]


def admin_token(tmp_path: Path) -> tuple[Path, tuple]:
    token = "admin-" + "5" * 24
    path = tmp_path / "admin.txt"
    path.write_text(f"operator:{token}\n")
    return path, (("authorization", f"Bearer {token}"),)


def key_label(key_path: Path, name: str) -> str:
    return public_key_of(load_private_key(key_path), name).describe()


def test_export_signs_the_digest_for_a_model_with_a_sequence(signed_bundles, keys):
    bundle = signed_bundles[0]
    record = json.loads((bundle / SIGNATURE).read_text())
    digest = bundle_digest(read_manifest(bundle))
    nightly = public_key_of(load_private_key(keys["nightly"]), "nightly")
    assert (record["format_version"], record["algorithm"], record["bundle_sha256"], record["key_sha256"],
            record["model"]) == (2, "ed25519", digest, nightly.key_sha256, "reach")
    assert len(base64.b64decode(record["signature"])) == 64
    # The sequence is the signing time in milliseconds: the later export has the higher one.
    assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", signing_time(record["sequence"]))
    assert signed_sequence(signed_bundles[1]) > record["sequence"]
    assert TrustedKeys.load(keys["trusted"]).names() == ["nightly"]
    assert oct(keys["nightly"].stat().st_mode & 0o777) == "0o600"  # the private key is the owner's alone


def test_export_signs_only_for_a_named_model(tmp_path, keys):
    from bundles import untrained_agent

    from l3p.training.export import ExportError, export_bundle

    agent, provenance = untrained_agent()
    for model in (None, "two words"):
        with pytest.raises(ExportError, match=r"^--sign-key needs --model NAME \(1-64 of"):
            export_bundle(agent, tmp_path / "bundle", provenance, sign_key=keys["nightly"], sign_model=model)
    with pytest.raises(ExportError, match="^--model names the model a signature is for: it goes with --sign-key"):
        export_bundle(agent, tmp_path / "bundle", provenance, sign_model="reach")
    assert not (tmp_path / "bundle").exists()


def test_only_versions_signed_by_a_trusted_key_for_their_model_are_served(tmp_path, signed_bundles, keys):
    root = tmp_path / "models"
    shutil.copytree(signed_bundles[0], root / "reach" / "1")
    admin, metadata = admin_token(tmp_path)
    args = ["--poll-interval", "0", "--admin-token-file", str(admin), "--trusted-keys", str(keys["trusted"])]
    nightly = key_label(keys["nightly"], "nightly")
    nightly_key, outsider_key = load_private_key(keys["nightly"]), load_private_key(keys["outsider"])
    with LocalServer(models=root, extra_args=args, stderr_lines=100_000, env=state_env(tmp_path)) as server, \
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
            assert "\n" not in loads[0].error and "\x1b" not in loads[0].error and str(root) not in loads[0].error
            return loads[0].error

        def unsigned(d: Path) -> None:
            (d / SIGNATURE).unlink()

        def tampered_manifest(d: Path) -> None:  # a served default changed after signing
            manifest = json.loads((d / "manifest.json").read_text())
            manifest["planner"]["d_max"] += 1.0
            (d / "manifest.json").write_text(json.dumps(manifest))

        def tampered_graph(d: Path) -> None:
            (d / "actor.onnx").write_bytes((d / "actor.onnx").read_bytes()[:-1] + b"\0")

        def edit_signature(d: Path, **fields) -> None:
            record = json.loads((d / SIGNATURE).read_text())
            (d / SIGNATURE).write_text(json.dumps({**record, **fields}))

        def forged(d: Path) -> None:  # the outsider signs, claiming to be the trusted key
            sign_bundle(d, outsider_key, "reach")
            edit_signature(d, key_sha256=public_key_of(nightly_key, "x").key_sha256)

        def by_outsider(d: Path) -> None:
            sign_bundle(d, outsider_key, "reach")

        def another_models(d: Path) -> None:  # the same bundle, signed (genuinely) for model "pick"
            sign_bundle(d, nightly_key, "pick")

        def renamed_model(d: Path) -> None:  # the signed model name edited: the signature no longer verifies
            edit_signature(d, model="reach2")

        def old_format(d: Path) -> None:  # what the first signed bundles carried: no model, no sequence
            record = json.loads((d / SIGNATURE).read_text())
            (d / SIGNATURE).write_text(json.dumps({k: v for k, v in record.items() if k not in ("model", "sequence")}
                                                  | {"format_version": 1}))

        def hostile_key_id(d: Path) -> None:
            edit_signature(d, key_sha256="\x1b[2J\nevil")

        def linked(d: Path) -> None:  # a link to a genuine signature of this very bundle
            (d / SIGNATURE).rename(tmp_path / "signature-elsewhere.json")
            (d / SIGNATURE).symlink_to(tmp_path / "signature-elsewhere.json")

        def hard_linked(d: Path) -> None:  # another name of a genuine signature of this very bundle
            os.link(d / SIGNATURE, tmp_path / "signature-hard-linked.json")

        assert "reach/2 is not signed (no signature.json) and --trusted-keys needs a signature by nightly; sign it " \
               "with l3p sign BUNDLE --key KEY --model reach" in add_version("2", unsigned)
        assert "the bundle changed after it was signed; refusing to serve it" in add_version("3", tampered_manifest)
        assert "reach/4/actor.onnx: sha256" in add_version("4", tampered_graph)  # the signed digest names it
        assert "reach/5: the signature does not verify with key nightly (forged or corrupted)" in \
            add_version("5", forged)
        # The key id a refused signature claims is never echoed.
        refused = add_version("6", by_outsider)
        assert "reach/6 is signed by a key that is not in --trusted-keys (nightly); refusing to serve it" in refused
        assert public_key_of(outsider_key, "x").key_sha256[:16] not in refused
        assert add_version("7", another_models).startswith(
            "reach/7 is signed for model pick, not reach: refusing to serve another model's bundle as reach (to serve "
            "it as reach, sign it with l3p sign BUNDLE --key KEY --model reach)")
        assert "reach/8: the signature does not verify with key nightly" in add_version("8", renamed_model)
        assert add_version("9", old_format).startswith(
            "reach/9/signature.json is a format 1 signature, which names no model and no sequence; re-sign the "
            "bundle with l3p sign BUNDLE --key KEY --model reach")
        refused = add_version("10", hostile_key_id)
        assert "reach/10 is signed by a key that is not in --trusted-keys" in refused and "evil" not in refused
        assert add_version("11", linked).startswith(
            "reach/11/signature.json: a symbolic link, which is never followed; refusing to read it")
        assert add_version("12", hard_linked).startswith(
            "reach/12/signature.json: a file with 2 hard links, which is never read")
        # Each refusal is logged once, with the version's full path for the operator.
        events = [json.loads(line) for line in server.stderr_tail(100_000).splitlines()]
        failed = [e for e in events if e["event"] == "model_load_failed"]
        assert [(e["version"], e["bundle"]) for e in failed] == [
            (str(v), str(root / "reach" / str(v))) for v in range(2, 13)]

        # The nightly retrain: another export, signed on the training side, copied in under any
        # number; no pin.
        shutil.copytree(signed_bundles[1], root / "reach" / "20")
        loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=metadata).loads
        assert [(load.model, load.version, load.loaded) for load in loads] == [("reach", "20", True)]
        status = stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT).models[0]
        assert (status.info.version, status.info.signed_by, status.last_error) == ("20", nightly, "")
        assert status.info.bundle_sha256 == bundle_digest(read_manifest(signed_bundles[1]))
        started = stub.StartEpisode(pb.StartEpisodeRequest(goal=GOAL, model="reach"), timeout=TIMEOUT)
        assert started.version == "20"


def test_a_version_signed_before_one_served_is_refused_across_restarts_until_rolled_back(
        tmp_path, signed_bundles, keys):
    """Version 1 copied in again under a higher number after version 2 served: refused on the
    swap and at the next start; ``l3p rollback`` on the server host lets it serve, and a later
    signature raises the mark again."""
    root, env = tmp_path / "models", state_env(tmp_path)
    old, new = signed_bundles
    shutil.copytree(old, root / "reach" / "1")
    shutil.copytree(new, root / "reach" / "2")
    admin, metadata = admin_token(tmp_path)
    args = ["--poll-interval", "0", "--admin-token-file", str(admin), "--trusted-keys", str(keys["trusted"])]
    (s_old, t_old), (s_new, t_new) = [(signed_sequence(b), signing_time(signed_sequence(b))) for b in (old, new)]
    rollback = (f"reach/3 is signed with sequence {s_old} (signed {t_old}), below sequence {s_new} (signed {t_new}) "
                "of reach/2, the highest this server has served for reach: refusing a rollback (to roll back on "
                "purpose, run l3p rollback --models DIR reach on the server)")
    with LocalServer(models=root, extra_args=args, env=env) as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        shutil.copytree(old, root / "reach" / "3")
        loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=metadata).loads
        assert [(load.version, load.loaded) for load in loads] == [("3", False)]
        assert loads[0].error.startswith(rollback)
        assert stub.GetModelInfo(pb.GetModelInfoRequest(model="reach"), timeout=TIMEOUT).version == "2"
    state = json.loads((tmp_path / "state" / "l3p" / "served-sequences.json").read_text())
    assert state["repositories"][os.path.realpath(root)]["reach"] == {
        "sequence": signed_sequence(new), "version": "2", "bundle_sha256": bundle_digest(read_manifest(new))}

    # A restart remembers: the server refuses to start on the rolled-back version.
    result = serve_once("--models", str(root), "--trusted-keys", str(keys["trusted"]), env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0] == f"l3p serve: error: {rollback}", result.stderr

    # The operator's deliberate rollback, on the server host.
    l3p = [sys.executable, "-m", "l3p.cli", "rollback", "--trusted-keys", str(keys["trusted"])]
    done = subprocess.run([*l3p, "--models", str(root), "reach"], capture_output=True, text=True, timeout=60,
                          env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"reach/3: the highest sequence served for reach is now {signed_sequence(old)}")
    with LocalServer(models=root, extra_args=args, env=env) as server, grpc.insecure_channel(server.target) as channel:
        stub = pb_grpc.PlannerStub(channel)
        info = stub.GetModelInfo(pb.GetModelInfoRequest(model="reach"), timeout=TIMEOUT)
        assert (info.version, info.bundle_sha256) == ("3", bundle_digest(read_manifest(old)))
        # The next nightly raises the mark again, so version 3 is a rollback once more.
        shutil.copytree(new, root / "reach" / "4")
        loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=metadata).loads
        assert [(load.version, load.loaded) for load in loads] == [("4", True)]
        (root / "reach" / "4").rename(root / "reach" / "4.disabled")
        loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=metadata).loads
        assert [(load.version, load.loaded) for load in loads] == [("3", False)]
        assert "refusing a rollback" in loads[0].error
        # Rolled back while it runs: the refused version is tried again once its mark changes.
        assert subprocess.run([*l3p, "--models", str(root), "reach"], capture_output=True, timeout=60, env=env,
                              check=False).returncode == 0
        loads = stub.ReloadModels(pb.ReloadModelsRequest(), timeout=TIMEOUT, metadata=metadata).loads
        assert [(load.version, load.loaded) for load in loads] == [("3", True)]


def serve_once(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "l3p.serving", "--port", "0", *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO, env=env, check=False)


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


def test_a_server_that_cannot_keep_its_served_sequences_refuses_signed_versions(tmp_path, signed_bundles, keys):
    root = tmp_path / "models"
    shutil.copytree(signed_bundles[0], root / "reach" / "1")
    state = tmp_path / "not-a-directory"
    state.write_text("")
    result = serve_once("--models", str(root), "--trusted-keys", str(keys["trusted"]),
                        env={**os.environ, "XDG_STATE_HOME": str(state)})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0] == (f"l3p serve: error: served-sequences file {state}/l3p/served-sequences.json: cannot open it "
                        "(Not a directory); signed versions are refused until it can be read and written (it keeps "
                        "the highest sequence served per model: fix it, or choose a writable file with "
                        "--served-sequences FILE)")


def test_served_sequences_live_where_the_operator_says(tmp_path, signed_bundles, keys):
    """--served-sequences FILE: the processes of --processes 2 keep their marks there (the default
    file is never written), a restart on the same file refuses the rolled-back version before a process is
    spawned, ``l3p rollback`` without that file is refused, and ``l3p rollback --served-sequences FILE``
    lowers that file's mark."""
    root, env, marks = tmp_path / "models", state_env(tmp_path), tmp_path / "volume" / "marks.json"
    old, new = signed_bundles
    shutil.copytree(new, root / "reach" / "2")
    args = ["--trusted-keys", str(keys["trusted"]), "--served-sequences", str(marks)]
    with LocalServer(models=root, extra_args=[*args, "--processes", "2"], env=env) as server, \
            grpc.insecure_channel(server.target) as channel:
        info = pb_grpc.PlannerStub(channel).GetModelInfo(pb.GetModelInfoRequest(model="reach"), timeout=TIMEOUT)
        assert info.version == "2"
    state = json.loads(marks.read_text())
    assert state["repositories"][os.path.realpath(root)]["reach"]["sequence"] == signed_sequence(new)
    assert not (tmp_path / "state").exists()

    shutil.copytree(old, root / "reach" / "3")
    result = serve_once("--models", str(root), *args, "--processes", "2", env=env)
    assert (result.returncode, result.stderr) == (2, (
        f"l3p serve: error: reach/3 is signed with sequence {signed_sequence(old)} (signed "
        f"{signing_time(signed_sequence(old))}), below sequence {signed_sequence(new)} (signed "
        f"{signing_time(signed_sequence(new))}) of reach/2, the highest this server has served for reach: refusing "
        "a rollback (to roll back on purpose, run l3p rollback --models DIR reach --served-sequences FILE on the "
        "server)\n"))

    # Without the server's --served-sequences, l3p rollback would lower a mark the server never
    # reads: the default file holds none for reach, so it is refused and left as it is (not made).
    rollback = [sys.executable, "-m", "l3p.cli", "rollback", "--trusted-keys", str(keys["trusted"]),
                "--models", str(root), "reach"]
    elsewhere = subprocess.run(rollback, capture_output=True, text=True, timeout=60, env=env, check=False)
    default = tmp_path / "state" / "l3p" / "served-sequences.json"
    assert (elsewhere.returncode, elsewhere.stdout, elsewhere.stderr) == (2, "", (
        f"l3p rollback: error: {default} holds no served sequence for reach of {root}: no server that reads it "
        "has served a signed reach, so there is nothing to lower (a server started with --served-sequences FILE "
        "keeps them there: give l3p rollback the same --served-sequences FILE)\n"))
    done = subprocess.run([*rollback, "--served-sequences", str(marks)],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0 and done.stdout.rstrip().endswith(f"Marks: {marks}"), done.stderr
    with LocalServer(models=root, extra_args=args, env=env) as server, grpc.insecure_channel(server.target) as channel:
        info = pb_grpc.PlannerStub(channel).GetModelInfo(pb.GetModelInfoRequest(model="reach"), timeout=TIMEOUT)
        assert info.version == "3"
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("where, trusted, message", [
    ("inside", True, "the served-sequences file {marks} is inside the model repository {root}: whoever can write "
                     "the repository could lower its marks; keep it outside (--served-sequences FILE)"),
    ("outside", False, "--served-sequences keeps the sequences of signatures: it goes with --trusted-keys"),
])
def test_a_served_sequences_file_that_cannot_protect_is_refused(tmp_path, signed_bundles, keys, where, trusted,
                                                                 message):
    root = tmp_path / "models"
    shutil.copytree(signed_bundles[0], root / "reach" / "1")
    marks = (root / "reach" if where == "inside" else tmp_path) / "marks.json"
    result = serve_once("--models", str(root), "--served-sequences", str(marks),
                        *(["--trusted-keys", str(keys["trusted"])] if trusted else []), env=state_env(tmp_path))
    assert (result.returncode, result.stderr) == (
        2, f"l3p serve: error: {message.format(marks=marks, root=root)}\n")
    assert not marks.exists()


def test_a_bundle_signed_for_another_model_is_refused_before_a_process_starts(tmp_path, signed_bundles, keys):
    """Signed (genuinely) for "pick", copied in as "reach": one line from the start-up check, no
    process spawned to load it."""
    root = tmp_path / "models"
    shutil.copytree(signed_bundles[0], root / "reach" / "1")
    sign_bundle(root / "reach" / "1", load_private_key(keys["nightly"]), "pick")
    for processes in ("1", "2"):
        result = serve_once("--models", str(root), "--trusted-keys", str(keys["trusted"]), "--processes", processes,
                            env=state_env(tmp_path))
        assert result.returncode == 2 and result.stderr.startswith(
            "l3p serve: error: reach/1 is signed for model pick, not reach: refusing to serve another model's "
            "bundle as reach") and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "state").exists()  # nothing was loaded, so nothing recorded


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
    unnamed = subprocess.run([*l3p, "sign", str(bundle), "--key", str(tmp_path / "ci.key")],
                             capture_output=True, text=True, timeout=60, check=False)
    assert unnamed.returncode == 2 and "--model" in unnamed.stderr  # a signature is for one model
    signed = subprocess.run([*l3p, "sign", str(bundle), "--key", str(tmp_path / "ci.key"), "--model", "reach"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert signed.returncode == 0, signed.stderr
    assert signed.stdout.startswith(f"signed {bundle} for model reach: signature.json by key sha256:")
    trusted = TrustedKeys.load(tmp_path / "ci.pub")
    signature = verify_bundle(bundle, bundle_digest(read_manifest(bundle)), trusted, model="reach")
    assert (signature.key.name, signature.model) == ("ci-key", "reach")
    wrong = subprocess.run([*l3p, "sign", str(bundle), "--key", str(tmp_path / "ci.pub"), "--model", "reach"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1
    assert "not an unencrypted private key PEM" in wrong.stderr
