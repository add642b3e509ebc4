from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def untrained_bundle(tmp_path_factory):
    """A valid bundle (FetchReach-v4, 16 landmarks) exported from untrained networks."""
    from bundles import export_untrained_bundle  # torch: only tests that need it pay

    return export_untrained_bundle(tmp_path_factory.mktemp("bundle") / "untrained")


@pytest.fixture(scope="session")
def push_bundle(tmp_path_factory):
    """A valid FetchPush-v4 bundle (8 landmarks) exported from untrained networks."""
    from bundles import export_untrained_bundle

    return export_untrained_bundle(tmp_path_factory.mktemp("push_bundle") / "FetchPush-v4", env_id="FetchPush-v4",
                                   n_landmarks=8)


@pytest.fixture(scope="session")
def tls_dir(tmp_path_factory):
    """A CA, a server pair for localhost/127.0.0.1 and client pairs robot-a, robot-b, made by the
    shipped deploy/tls/make-certs.sh (openssl) at test time."""
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (deploy/tls/make-certs.sh needs it)")
    out = tmp_path_factory.mktemp("tls")
    script = Path(__file__).resolve().parents[1] / "deploy" / "tls" / "make-certs.sh"
    subprocess.run(["bash", str(script), str(out), "robot-a", "robot-b"], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def token_file(tmp_path_factory):
    """Tokens for robot-a and robot-b (name:token) and one unnamed; returns (path, {name: token})."""
    import secrets

    tokens = {"robot-a": secrets.token_hex(16), "robot-b": secrets.token_hex(16), "": secrets.token_hex(16)}
    path = tmp_path_factory.mktemp("auth") / "tokens.txt"
    path.write_text(f"# planner tokens\nrobot-a:{tokens['robot-a']}\n\n"
                    f"robot-b:{tokens['robot-b']}\n{tokens['']}\n")
    return path, tokens
