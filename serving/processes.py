"""``l3p serve --processes N``: N server processes on one port (gRPC's multiprocessing recipe).

The parent holds the port with sockets that never listen, one per address --host names
(startup.bind_port): bound without SO_REUSEPORT, so a port any other socket holds is refused
(``address already in use``), then open to SO_REUSEPORT sockets only, so a later server, one
process or many, is refused too. It then spawns N processes (fresh interpreters: gRPC state must
not be forked). Each loads the bundle and binds the same port with SO_REUSEPORT; the kernel
spreads new connections over them. A program of the same user that asks for SO_REUSEPORT itself
can still bind beside them: that is what the option is for. A client channel is one connection,
so a robot's sessions stay on the process that opened them. Processes share nothing but a counter
of ReloadModels calls (shared memory): the process that answers one counts it, and each other
process looks at the repository again before its next GetModelInfo, ListModels or StartEpisode,
so a ReloadModels reaches them all. Behind a proxy that may use several upstream connections, run
one replica per port instead (deploy/nginx).

The parent prints ``L3P_SERVER_READY port=N`` once every process serves and forwards SIGTERM and
SIGINT to all of them (each then drains as a single server does). If a process exits on its own,
the parent stops the others and exits 1 (2 if that process never started serving), so the
supervisor restarts the whole server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Any

from l3p.core.errors import L3PError
from l3p.serving.config import ServeConfig
from l3p.serving.logs import configure_logging, event
from l3p.serving.server import serve
from l3p.serving.startup import bind_port, check_port, exit_with_parent, prepare, report


@dataclass
class _Worker:
    index: int
    process: Any  # multiprocessing.Process (spawn context)
    ready: Any  # the receiving end of the worker's ready pipe
    port: int | None = None
    exit_code: int | None = field(default=None)


def _worker_config(config: ServeConfig, port: int, index: int, openpi_port: int | None) -> ServeConfig:
    return dataclasses.replace(config, port=port, processes=1, exit_with_parent=os.getpid(),
                               metrics_port=config.metrics_port + index if config.metrics_port else 0,
                               openpi_port=openpi_port)


def _worker(config: ServeConfig, index: int, ready, reloads) -> None:
    """One server process. Runs in a spawned interpreter."""
    os.setpgrp()  # a terminal's Ctrl-C reaches the parent only, which forwards it once
    configure_logging(config.log_level, capture_native=True, log_format=config.log_format)
    try:  # the bundle may have changed since the parent checked it
        sys.exit(serve(config, *prepare(config), on_ready=ready.send, share_port=True, reloads=reloads,
                       worker=index))
    except L3PError as exc:
        sys.exit(report(exc))


def run_processes(config: ServeConfig) -> int:
    """Serves with config.processes processes until SIGTERM/SIGINT; the exit code. ServeError,
    before a process is spawned, if the port or a metrics port is taken."""
    reservation = bind_port(config.host, config.port, shared=True)
    port = reservation.port
    if config.metrics_port:
        try:
            for index in range(config.processes):
                check_port(config.metrics_host, config.metrics_port + index, "--metrics-port")
        except BaseException:
            reservation.close()
            raise
    try:  # the openpi listener's port, held alike for the processes' listeners
        openpi = (None if config.openpi_port is None
                  else bind_port(config.host, config.openpi_port, "--openpi-port", shared=True))
    except BaseException:
        reservation.close()
        raise
    openpi_port = None if openpi is None else openpi.port
    context = multiprocessing.get_context("spawn")
    reloads = context.Value("Q", 0)  # ReloadModels answered by any process: the others look again
    workers: list[_Worker] = []
    stopping = failed = False

    def stop_all(signum: int = signal.SIGTERM, frame=None) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers:
            if worker.process.is_alive():
                os.kill(worker.process.pid, signal.SIGTERM)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop_all)
    with reservation, openpi if openpi is not None else contextlib.nullcontext():
        for index in range(config.processes):
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(target=_worker, name=f"l3p-serve-{index}",
                                      args=(_worker_config(config, port, index, openpi_port), index, sender,
                                            reloads))
            process.start()
            sender.close()
            workers.append(_Worker(index, process, receiver))
        if config.exit_with_parent is not None:
            exit_with_parent(config.exit_with_parent)
        announced = False
        while any(worker.exit_code is None for worker in workers):
            waiting = [w.ready for w in workers if w.port is None and w.exit_code is None]
            sentinels = [w.process.sentinel for w in workers if w.exit_code is None]
            for item in multiprocessing.connection.wait(waiting + sentinels):
                for worker in workers:
                    if item is worker.ready:
                        try:
                            worker.port = worker.ready.recv()
                        except EOFError:  # exited before serving; its sentinel tells the rest
                            worker.port = -1
                    elif item == worker.process.sentinel:
                        worker.process.join()
                        worker.exit_code = worker.process.exitcode
                        if not stopping:
                            failed = True
                            event(logging.ERROR, "worker_exited", worker=worker.index,
                                  worker_pid=worker.process.pid, exit_code=worker.exit_code)
                            stop_all()
            if not announced and not stopping and all(w.port == port for w in workers):
                announced = True
                event(logging.INFO, "serving_processes", port=port, processes=len(workers),
                      pids=[w.process.pid for w in workers])
                if openpi_port is not None:
                    print(f"L3P_OPENPI_READY port={openpi_port}", flush=True)
                print(f"L3P_SERVER_READY port={port}", flush=True)
    if failed:  # 2 as for a single server that cannot start; 1 once it has served
        return 1 if announced else 2
    return 0 if all(w.exit_code == 0 for w in workers) else 1
