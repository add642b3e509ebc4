"""Test helper: nginx running the shipped deploy/nginx/l3p.conf, with ports and paths rewritten.

The shipped file is an http{}-context snippet; this wraps it in a minimal main config whose pid,
logs and temp paths live in a scratch directory, and runs ``nginx -g 'daemon off;'`` in the
foreground. ``unavailable()`` says why nginx cannot run here (for skips).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

SHIPPED = Path(__file__).resolve().parents[1] / "deploy" / "nginx" / "l3p.conf"
REPLICA_PORTS = (50061, 50062)  # as written in the shipped file
LISTEN_PORT = 8443
CERT_DIR = "/etc/l3p/tls"


def unavailable() -> str | None:
    nginx = shutil.which("nginx") or (Path("/usr/sbin/nginx") if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        return "nginx is not installed (scripts/test installs nginx-light when run as root)"
    version = subprocess.run([str(nginx), "-V"], capture_output=True, text=True).stderr
    if "--without-http_grpc_module" in version or "--with-http_v2_module" not in version:
        return f"this nginx lacks the grpc or http_v2 module: {version.splitlines()[0]}"
    return None


def nginx_binary() -> str:
    return shutil.which("nginx") or "/usr/sbin/nginx"


def render(replica_ports: tuple[int, int], listen_port: int, cert_dir: Path) -> str:
    text = SHIPPED.read_text()
    for shipped, port in zip(REPLICA_PORTS, replica_ports):
        text = text.replace(f"127.0.0.1:{shipped}", f"127.0.0.1:{port}")
    text = text.replace(f"listen {LISTEN_PORT} ", f"listen 127.0.0.1:{listen_port} ")
    text = text.replace(CERT_DIR, str(cert_dir))
    # A replica that failed is retried after fail_timeout; short, so a restarted one gets traffic
    # within the test.
    return text.replace("fail_timeout=10s", "fail_timeout=1s")


class Nginx:
    def __init__(self, workdir: Path, replica_ports: tuple[int, int], listen_port: int, cert_dir: Path):
        self.workdir = workdir
        self.port = listen_port
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "l3p.conf").write_text(render(replica_ports, listen_port, cert_dir))
        temp = "\n".join(f"    {kind}_temp_path {workdir}/{kind};"
                         for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (workdir / "nginx.conf").write_text(
            f"worker_processes 1;\npid {workdir}/nginx.pid;\nerror_log {workdir}/error.log info;\n"
            f"events {{ worker_connections 1024; }}\n"
            f"http {{\n    access_log off;\n{temp}\n    include {workdir}/l3p.conf;\n}}\n")
        self.proc: subprocess.Popen | None = None

    def check(self) -> None:
        """`nginx -t` on the rendered config; AssertionError with nginx's message otherwise."""
        result = subprocess.run(self._command("-t"), capture_output=True, text=True)
        assert result.returncode == 0, result.stderr

    def _command(self, *extra: str) -> list[str]:
        return [nginx_binary(), "-p", str(self.workdir), "-c", str(self.workdir / "nginx.conf"),
                "-e", str(self.workdir / "error.log"), "-g", "daemon off;", *extra]

    def start(self, timeout_s: float = 20.0) -> Nginx:
        self.proc = subprocess.Popen(self._command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {self.proc.stderr.read().decode()}{self.error_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not listen on {self.port}: {self.error_log()}")
                time.sleep(0.05)

    def error_log(self) -> str:
        path = self.workdir / "error.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # fast shutdown
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
