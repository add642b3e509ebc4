"""The learner's device: choosing it, feeding it batches, and replaying its optimizer step as a CUDA graph.

On the CPU none of this is used (the update reads the replay's numpy arrays directly, as it always
did). On CUDA a host batch goes up in one pinned, asynchronous copy, and each part of the optimizer
step (every network's forward, backward and Adam step, with `capturable` optimizers; the latent
clusters' GLS refresh and ELBO step) is captured once and then replayed as a CUDA graph: one launch
instead of hundreds of small kernels, and no wait for the host in between.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import torch

from l3p.core.errors import L3PError

log = logging.getLogger(__name__)

GRAPH_WARMUP_STEPS = 3
"""Eager optimizer steps (real ones, on real batches) on a side stream before the capture, as CUDA
graph capture requires: they allocate the optimizer state and settle the caching allocator."""


class DeviceError(L3PError):
    """The asked-for device does not exist here."""


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N``, or ``auto`` (the first GPU when torch sees one)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"device {name!r}: torch {torch.__version__} sees no CUDA device "
                              f"(built for CUDA: {torch.version.cuda or 'no'}); use device=cpu or auto")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    return device


class BatchUploader:
    """Host batch -> device tensors in one pinned, non-blocking copy. Two pinned buffers alternate,
    so the next batch is packed on the host while the previous one may still be in flight."""

    def __init__(self, device: torch.device):
        self.device = device
        self._buffers: list[torch.Tensor | None] = [None, None]
        self._copied: list[torch.cuda.Event | None] = [None, None]
        self._turn = 0

    def __call__(self, arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        self._turn = i = 1 - self._turn
        if self._copied[i] is not None:
            self._copied[i].synchronize()  # its previous copy must be done before it is overwritten
        total = sum(a.size for a in arrays.values())
        if self._buffers[i] is None or self._buffers[i].numel() != total:
            self._buffers[i] = torch.empty(total, dtype=torch.float32, pin_memory=True)
        np.concatenate([a.reshape(-1) for a in arrays.values()], out=self._buffers[i].numpy(), casting="same_kind")
        flat = self._buffers[i].to(self.device, non_blocking=True)
        self._copied[i] = torch.cuda.Event()
        self._copied[i].record()
        out, start = {}, 0
        for k, a in arrays.items():
            out[k] = flat[start:start + a.size].view(a.shape)
            start += a.size
        return out


class GraphedStep:
    """``step(inputs) -> tensor`` run eagerly for `GRAPH_WARMUP_STEPS` calls, then captured once and
    replayed as a CUDA graph on static copies of its inputs. ``step`` must only change tensors in
    place (parameters, optimizer state, normalizer buffers keep their memory) and its inputs must
    keep their shapes. A capture that fails is logged with its reason; every later call runs eagerly.
    ``name`` says which step in the log."""

    def __init__(self, step: Callable[[dict[str, torch.Tensor]], torch.Tensor], device: torch.device,
                 name: str = "optimizer step"):
        self.step, self.device, self.name = step, device, name
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.eager_reason: str | None = None  # why the step runs eagerly for good
        self._inputs: dict[str, torch.Tensor] = {}
        self._output: torch.Tensor | None = None

    def __call__(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.graph is not None:
            for k, v in inputs.items():
                self._inputs[k].copy_(v, non_blocking=True)
            self.graph.replay()
            return self._output.clone()
        if self.eager_reason is not None:
            return self.step(inputs)
        self.calls += 1
        if self.calls <= GRAPH_WARMUP_STEPS:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                out = self.step(inputs)
            torch.cuda.current_stream(self.device).wait_stream(side)
            return out
        return self._capture(inputs)

    def _capture(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        self._inputs = {k: v.clone() for k, v in inputs.items()}
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self._output = self.step(self._inputs)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the step runs eagerly
            # Capture records kernels without running them: nothing was stepped.
            torch.cuda.synchronize(self.device)
            self.eager_reason = f"CUDA graph capture failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"
            log.warning("%s; the %s runs eagerly", self.eager_reason, self.name)
            self._inputs, self._output = {}, None
            return self.step(inputs)
        self.graph = graph
        log.info("%s captured as a CUDA graph after %d eager calls", self.name, GRAPH_WARMUP_STEPS)
        graph.replay()
        return self._output.clone()
