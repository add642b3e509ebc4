"""Greedy Latent Sparsification: farthest-point sampling in latent space.

Two forms of one rule: `greedy_latent_sparsification` on host arrays (the CPU learner, the
clusters' initialization, the trainer's and export's picks) and `static_greedy_latent_sparsification`
on device tensors, in fixed shapes and with no value read back to the host, so that a CUDA graph
can capture it (the GPU learner's cluster-batch refresh). Both take the first point given and break
ties towards the lowest index; they pick the same points up to float rounding of the distances.
"""
from __future__ import annotations

import numpy as np
import torch


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


def static_greedy_latent_sparsification(latents: torch.Tensor, k: int, first: torch.Tensor) -> torch.Tensor:
    """`greedy_latent_sparsification` of ``latents`` [n, d] from the index in ``first`` (a
    one-element integer tensor): the [k] indices, as a tensor on the latents' device. Shapes depend
    on n, d and k alone, and no value goes to the host, so the whole loop can be captured once.

    The squared distances between all pairs are computed first ([n, n], one latent dimension at a
    time: no [n, n, d] temporary); each pick is then three small kernels (argmax, row, minimum)."""
    n, dim = latents.shape
    if not 0 < k <= n:
        raise ValueError(f"k must be in 1..{n}, got {k}")
    sq = torch.zeros(n, n, dtype=latents.dtype, device=latents.device)
    for j in range(dim):
        column = latents[:, j]
        sq += (column[:, None] - column[None, :]).square()
    picks = [first.reshape(1).long()]
    min_sq = sq.index_select(0, picks[0]).squeeze(0)
    for _ in range(1, k):
        picks.append(torch.argmax(min_sq).reshape(1))  # ties: the first maximum, as numpy's argmax
        min_sq = torch.minimum(min_sq, sq.index_select(0, picks[-1]).squeeze(0))
    return torch.cat(picks)
