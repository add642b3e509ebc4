"""A deterministic MLP policy as a numpy file: how a trained expert reaches code without torch.

``l3p expert`` trains the ant expert with torch and writes its actor's deterministic action,
``tanh(W_k relu(... relu(W_0 x + b_0) ...) + b_k)``, as one ``.npz``; the dataset generator
(l3p.sim, which never imports torch) reads it back with this module. The file holds ``w0, b0,
w1, b1, ...`` (layer k maps ``w_k.shape[1]`` inputs to ``w_k.shape[0]`` outputs, as torch's
Linear) and ``metadata``: a JSON object with ``format``, the input and action sizes, and whatever
the writer records (its run, steps, seed). The policy's digest is the sha256 of its weights, so
datasets name the expert that made them.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.errors import L3PError

FORMAT = "l3p-mlp-policy"
FORMAT_VERSION = 1


class PolicyFileError(L3PError):
    """A policy file that cannot be used; the message names the file and the problem."""


def weights_digest(weights: list[np.ndarray], biases: list[np.ndarray]) -> str:
    """sha256 over the layers in order: shape and float32 bytes of each weight and bias."""
    h = hashlib.sha256()
    for w, b in zip(weights, biases):
        for a in (w, b):
            a = np.ascontiguousarray(a, np.float32)
            h.update(f"{a.shape}|".encode())
            h.update(a.tobytes())
    return h.hexdigest()


class MLPPolicy:
    """``policy(x)`` -> the deterministic action for one input ``x`` (or a batch ``[n, in]``)."""

    def __init__(self, weights: list[np.ndarray], biases: list[np.ndarray], metadata: dict[str, Any] | None = None):
        if not weights or len(weights) != len(biases):
            raise PolicyFileError("an MLP policy needs one bias per weight matrix, and at least one layer")
        self.weights = [np.asarray(w, np.float32) for w in weights]
        self.biases = [np.asarray(b, np.float32) for b in biases]
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            if w.ndim != 2 or b.shape != (w.shape[0],) or (k and w.shape[1] != self.weights[k - 1].shape[0]):
                raise PolicyFileError(f"layer {k}: weight {w.shape} and bias {b.shape} do not chain")
        self.metadata = dict(metadata or {})
        self.digest = weights_digest(self.weights, self.biases)

    @property
    def input_dim(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def action_dim(self) -> int:
        return int(self.weights[-1].shape[0])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, np.float32)
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w.T + b
            if k < len(self.weights) - 1:
                h = np.maximum(h, 0.0)
        return np.tanh(h)


def save_mlp_policy(path: str | os.PathLike[str], policy: MLPPolicy) -> str:
    """Write ``policy`` (atomically: a temporary file, then a rename); returns its digest."""
    meta = {**policy.metadata, "format": FORMAT, "format_version": FORMAT_VERSION, "input_dim": policy.input_dim,
            "action_dim": policy.action_dim, "sha256": policy.digest}
    arrays = {f"{name}{k}": a for k, (w, b) in enumerate(zip(policy.weights, policy.biases))
              for name, a in (("w", w), ("b", b))}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays, metadata=np.array(json.dumps(meta, sort_keys=True)))
    os.replace(tmp, path)
    return policy.digest


def load_mlp_policy(path: str | os.PathLike[str]) -> MLPPolicy:
    """Read a policy file and check its digest; any problem is one `PolicyFileError` line."""
    path = Path(path)
    if not path.is_file():
        raise PolicyFileError(f"no policy file at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            files = {k: data[k] for k in data.files}
        meta = json.loads(str(files.pop("metadata")))
    except Exception as exc:  # zipfile, JSON, a missing key: all "unreadable"
        raise PolicyFileError(f"policy file {path} is not readable ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise PolicyFileError(f"policy file {path}: not a {FORMAT!r} version {FORMAT_VERSION} file")
    n = len([k for k in files if k.startswith("w")])
    try:
        policy = MLPPolicy([files[f"w{k}"] for k in range(n)], [files[f"b{k}"] for k in range(n)], meta)
    except KeyError as exc:
        raise PolicyFileError(f"policy file {path}: no array {exc}") from None
    if meta.get("sha256") != policy.digest:
        raise PolicyFileError(f"policy file {path}: its weights do not match the sha256 in its metadata")
    return policy
