from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def untrained_bundle(tmp_path_factory):
    """A valid bundle (FetchReach-v4, 16 landmarks) exported from untrained networks."""
    from training.export import export_untrained_bundle  # torch: only tests that need it pay

    return export_untrained_bundle(tmp_path_factory.mktemp("bundle") / "untrained")


@pytest.fixture(scope="session")
def push_bundle(tmp_path_factory):
    """A valid FetchPush-v4 bundle (8 landmarks) exported from untrained networks."""
    from training.export import export_untrained_bundle

    return export_untrained_bundle(tmp_path_factory.mktemp("push_bundle") / "FetchPush-v4", env_id="FetchPush-v4",
                                   n_landmarks=8)
