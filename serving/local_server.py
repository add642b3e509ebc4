"""Run the planner server as a child process (for the demo, plots, benchmarks and tests).

``python -m l3p.serving --bundle DIR --port N`` (or ``--models DIR``) prints ``L3P_SERVER_READY port=<N>`` on
stdout once it serves. :class:`LocalServer` starts it, waits for that line (reporting the
server's stderr tail if it dies first) and always stops it: SIGTERM, a grace period, SIGKILL.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from l3p.core.errors import UNAVAILABLE, L3PError

READY_RE = re.compile(r"L3P_SERVER_READY port=(\d+)")
OPENPI_READY_RE = re.compile(r"L3P_OPENPI_READY port=(\d+)")  # before READY, with --openpi-port


class ServerStartError(L3PError):
    """The server exited or stayed silent before printing its READY line."""

    exit_code = UNAVAILABLE


class LocalServer:
    """A planner server subprocess; use as a context manager or call start/stop.

    Args:
        bundle: the model bundle directory (``--bundle``); or, as ``models``, a model
            repository directory (``--models``).
        port: 0 picks a free port (read back from the READY line).
        host: interface to bind; loopback by default.
        extra_args: more command-line arguments for the server.
        module: the server module (``python -m <module>``).
        cwd: the server's working directory (default: this process's).
        stderr_lines: how many of the server's last stderr lines to keep (``stderr_tail``).
        env: the server's whole environment (default: this process's). The server sizes its
            own thread pools, whatever the environment says.
    """

    def __init__(
        self,
        bundle: str | os.PathLike[str] | None = None,
        *,
        models: str | os.PathLike[str] | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        extra_args: Sequence[str] = (),
        module: str = "l3p.serving",
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        stderr_lines: int = 40,
    ) -> None:
        if (bundle is None) == (models is None):
            raise ValueError("give a bundle or a models directory")
        what = ["--bundle", str(bundle)] if bundle is not None else ["--models", str(models)]
        self.bundle = Path(bundle if bundle is not None else models)
        self.requested_port = port
        self.host = host
        self.port: int | None = None
        self.openpi_port: int | None = None  # the openpi listener's port (--openpi-port)
        # --exit-with-parent: the server gets SIGTERM if this process dies, even by SIGKILL.
        # (Set by the server itself after exec: a preexec_fn would run Python in a forked copy
        # of this gRPC-using process, which gRPC's fork handlers can abort.)
        self.command = [
            sys.executable, "-m", module, *what, "--port", str(port),
            "--exit-with-parent", str(os.getpid()), *extra_args,
        ]
        if host != "127.0.0.1":
            self.command += ["--host", host]
        self.cwd = Path(cwd) if cwd is not None else None
        self.env = dict(os.environ if env is None else env)
        self.env["PYTHONUNBUFFERED"] = "1"  # the READY line must not sit in a pipe buffer
        # The child imports the installed package, never a folder of the caller's working directory.
        self.env["PYTHONSAFEPATH"] = "1"
        self.proc: subprocess.Popen[str] | None = None
        self._stdout: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=stderr_lines)
        self._threads: list[threading.Thread] = []

    @property
    def target(self) -> str:
        if self.port is None:
            raise RuntimeError("server not ready yet")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"{host}:{self.port}"

    def stderr_tail(self, lines: int = 20) -> str:
        return "".join(list(self._stderr_tail)[-lines:])

    def start(self) -> LocalServer:
        """Launch the process (does not wait; see :meth:`wait_ready`)."""
        if self.proc is not None:
            raise RuntimeError("already started")
        self.proc = subprocess.Popen(
            self.command,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        # Drain both pipes for the server's whole life, or a chatty server blocks on write.
        self._threads = [
            threading.Thread(
                target=self._pump, args=(self.proc.stdout, self._stdout.put, True), daemon=True
            ),
            threading.Thread(
                target=self._pump, args=(self.proc.stderr, self._stderr_tail.append, False), daemon=True
            ),
        ]
        for t in self._threads:
            t.start()
        return self

    @staticmethod
    def _pump(stream, sink, mark_eof: bool) -> None:
        for line in stream:
            sink(line)
        if mark_eof:
            sink(None)

    def wait_ready(self, timeout_s: float = 60.0) -> int:
        """Block until the READY line; the port. ``ServerStartError`` if it dies or times out."""
        assert self.proc is not None, "call start() first"
        deadline = time.monotonic() + timeout_s
        while self.port is None:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise ServerStartError(
                    f"server did not report ready within {timeout_s:.0f} s "
                    f"({' '.join(self.command)}); stderr tail:\n{self.stderr_tail()}"
                )
            try:
                line = self._stdout.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            if line is None:  # stdout closed: the process is exiting
                code = self.proc.wait(timeout=10)
                self._join_pumps()
                raise ServerStartError(
                    f"server exited with code {code} before it was ready "
                    f"({' '.join(self.command)}); stderr tail:\n{self.stderr_tail()}"
                )
            openpi = OPENPI_READY_RE.search(line)
            if openpi:
                self.openpi_port = int(openpi.group(1))
            match = READY_RE.search(line)
            if match:
                self.port = int(match.group(1))
        return self.port

    def stop(self, grace_s: float = 5.0) -> int | None:
        """Terminate, wait ``grace_s``, then kill. Idempotent; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._join_pumps()
        return self.proc.returncode

    def _join_pumps(self) -> None:
        for t in self._threads:
            t.join(timeout=2.0)

    def __enter__(self) -> LocalServer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
