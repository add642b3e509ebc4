"""Greedy Latent Sparsification: farthest-point sampling in latent space."""
from __future__ import annotations

import numpy as np


def greedy_latent_sparsification(latents: np.ndarray, k: int, rng: np.random.Generator | None = None,
                                 first: int | None = None) -> np.ndarray:
    """Indices of ``k`` points chosen greedily: a random first point (``first``, else drawn from
    ``rng``), then repeatedly the point whose minimum squared distance to the chosen set is largest.
    Deterministic given the generator state."""
    n = latents.shape[0]
    if not 0 < k <= n:
        raise ValueError(f"k must be in 1..{n}, got {k}")
    chosen = np.empty(k, dtype=np.int64)
    chosen[0] = rng.integers(n) if first is None else first
    min_sq = ((latents - latents[chosen[0]]) ** 2).sum(-1)
    for i in range(1, k):
        chosen[i] = int(np.argmax(min_sq))
        min_sq = np.minimum(min_sq, ((latents - latents[chosen[i]]) ** 2).sum(-1))
    return chosen
