"""The seed ranges, disjoint so that no result is measured on episodes it was trained or tuned on.

Episode i of an evaluation uses env (and planner) seed ``base + i``; the mazes' far start/goal
pair lists are drawn from the same base.
"""

TRAIN_HIGH = 2**30
"""Training episodes draw their env seeds from [0, TRAIN_HIGH)."""
TRAINING_EVAL = 2**30
"""In-training evaluation (the learning curve) uses TRAINING_EVAL + i."""
VALIDATION = 1_500_000_000
"""Choosing served defaults (validation sweeps) uses VALIDATION + i."""
HELD_OUT = 2_000_000_000
"""Reported results (the demo, eval_heldout.json) use HELD_OUT + i."""


def seed_range(seed: int) -> str:
    """The range a seed falls in, as a run announces it."""
    if seed >= HELD_OUT:
        return "held-out"
    if seed >= VALIDATION:
        return "validation"
    if seed >= TRAINING_EVAL:
        return "training evaluation"
    return "training" if seed >= 0 else "outside the ranges"
