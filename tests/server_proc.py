"""Test helper: the planner server in a subprocess.

``serve(bundle)`` starts ``python -m l3p.serving --bundle DIR --port 0`` (through
:class:`l3p.serving.local_server.LocalServer`), waits for its READY line and yields the port; the
server is always stopped. Tests that stop or restart the server use ``LocalServer`` directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from l3p.serving.local_server import LocalServer


@contextmanager
def serve(bundle: Path, *, port: int = 0, extra_args: Sequence[str] = (), ready_timeout_s: float = 60.0) -> Iterator[int]:
    server = LocalServer(bundle, port=port, extra_args=extra_args).start()
    try:
        yield server.wait_ready(ready_timeout_s)
    finally:
        server.stop()
