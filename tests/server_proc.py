"""Test helpers: the planner server in a subprocess, and a FetchPush bundle shared per session.

``serve(bundle)`` starts ``python -m serving.server --bundle DIR --port 0`` (through
:class:`clients.local_server.LocalServer`), waits for its READY line and yields the port; the
server is always stopped. Tests that stop or restart the server use ``LocalServer`` directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from clients.local_server import LocalServer

_push_bundle: Path | None = None


@contextmanager
def serve(bundle: Path, *, port: int = 0, extra_args: Sequence[str] = (), ready_timeout_s: float = 60.0) -> Iterator[int]:
    server = LocalServer(bundle, port=port, extra_args=extra_args).start()
    try:
        yield server.wait_ready(ready_timeout_s)
    finally:
        server.stop()


def push_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained FetchPush-v4 bundle (8 landmarks), exported once per test session.

    Memoized here rather than in a fixture because fixtures imported into several test modules
    are cached per module.
    """
    global _push_bundle
    if _push_bundle is None:
        export = pytest.importorskip("training.export", reason="needs training.export (torch)")
        out = tmp_path_factory.mktemp("push_bundle") / "FetchPush-v4"
        _push_bundle = Path(export.export_untrained_bundle(out, env_id="FetchPush-v4", n_landmarks=8))
    return _push_bundle
