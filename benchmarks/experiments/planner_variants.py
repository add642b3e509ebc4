"""Planner variants on an ant bundle, in-process (the server's planner code): validation episodes (seeds
1 500 000 000 + i, OGBench's tasks 1-5 in turn, 1,000 steps); wins and the mean speed (m per step) over
all episodes.

    python benchmarks/experiments/planner_variants.py BUNDLE EPISODES VARIANT [KEY=VALUE ...] [--margin M]
        [--max-steps T]

VARIANT: served (the bundle's planner); sight (a diagnostic that uses the maze's walls, which no served
planner knows: only the data edges whose straight segment stays --margin m clear of every wall cell).
KEY=VALUE: planner options, e.g. mode=naive or next_hop=true (the route's next landmark after the one
nearest the state, every step).
"""
import numpy as np

from l3p.core.overrides import parse_overrides
from episodes import Model, episode_parser, load, planner_episode
from walls import wall_boxes

# Variants that patched the planner's private code: no option of the planner expresses them.
PATCHED = "retired: it patched the planner's private code (docs/measurements/antmaze-offline/planner_variants.txt)"
RETIRED = {"farthest": PATCHED, "past": PATCHED, "counter": PATCHED,
           "successor": "retired: served next_hop=true pursues the route's next landmark, every step"}

ap = episode_parser()
ap.add_argument("variant", help="served or sight")
ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="planner options, e.g. next_hop=true")
ap.add_argument("--margin", type=float, default=0.0, help="sight: the edges' clearance of the walls (m)")
a = ap.parse_args()
if a.variant in RETIRED:
    raise SystemExit(f"variant {a.variant!r}: {RETIRED[a.variant]}")
if a.variant not in ("served", "sight"):
    raise SystemExit(f"unknown variant {a.variant!r} (served or sight)")
overrides = parse_overrides(a.overrides, "KEY=VALUE")


def clear_of_walls(edges: np.ndarray | None, landmarks: np.ndarray, env, margin: float) -> np.ndarray:
    """The edges (None: every pair) whose straight segment stays ``margin`` m clear of every wall cell."""
    env.reset(seed=0)
    low, high = wall_boxes(env)
    low, high = low - margin, high + margin
    edges = np.ones((len(landmarks), len(landmarks)), bool) if edges is None else np.array(edges, bool)
    kept = edges.copy()
    t = np.linspace(0.0, 1.0, 25)[:, None]
    for i, j in np.argwhere(kept):
        points = (landmarks[i] + t * (landmarks[j] - landmarks[i]))[:, None, :]
        kept[i, j] = not ((points > low) & (points < high)).all(-1).any()
    print(f"edges clear of the walls by {margin} m: {int(kept.sum())} of {int(np.sum(edges))}")
    return kept


model = load(a.bundle)
env = model.env(a.max_steps)
if a.variant == "sight":
    model = Model(model.bundle, edges=clear_of_walls(model.bundle.edges, model.bundle.landmarks, env, a.margin))
config = model.config(**overrides)
wins, path, steps = 0, 0.0, 0
for seed, task in model.episodes(env, a.episodes):
    episode = planner_episode(model, env, seed, task, config, max_steps=a.max_steps)
    path += sum(float(np.linalg.norm(step.next_achieved - step.achieved)) for step in episode.steps)
    steps += len(episode.steps)
    wins += episode.success
shown = {**overrides, **({"margin": a.margin} if a.variant == "sight" else {})}
print(f"{a.variant} {shown}: {wins} of {a.episodes}, {path / steps:.3f} m per step")
