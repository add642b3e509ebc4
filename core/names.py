"""The planner's names, declared once: modes, searches, the final goal's index; the distribution's
name and how to add an extra to this install. The planner's options are `PlannerConfig`'s fields
(core/config.py)."""
from __future__ import annotations

import numbers

DISTRIBUTION = "l3p-service"  # the name to pip install, with its extras

MODES = ("l3p", "naive", "policy")
SEARCHES = ("soft", "hard", "expectation")

GOAL = -1  # subgoal index of the final goal

# Below this the soft search's exponents -d / temperature overflow (at 5e-324, 1 / temperature
# is inf and 0 * inf is NaN: pairs turned unreachable). The soft search is already min-plus
# (exact) well above it; search="hard" is its limit.
MIN_TEMPERATURE = 1e-6


def install_hint(extras: str) -> str:
    """The pip command that adds ``extras`` (``"serve"``, ``"ros2,sim"``) to this install, in the form
    for how it was made (pip records it: a checkout, a wheel file, an index), with the checkout's
    form beside it: no index serves this distribution, so ``l3p-service[...]`` alone is no answer."""
    checkout = f"pip install -e '.[{extras}]'"
    source, editable = _installed_from()
    if source is None:
        return (f"{checkout} in a checkout, or pip install 'WHEEL.whl[{extras}]' with the wheel "
                f"(pip install '{DISTRIBUTION}[{extras}]' from an index that serves it)")
    if source.endswith(".whl"):
        return f"pip install '{source}[{extras}]' (the wheel this install came from; in a checkout: {checkout})"
    if not editable:
        checkout = f"pip install '.[{extras}]'"
    return f"{checkout} in the checkout {source} (with a wheel: pip install 'WHEEL.whl[{extras}]')"


def _installed_from() -> tuple[str | None, bool]:
    """(the local directory or wheel file this distribution was installed from, editable), or
    (None, False) for an install from an index or without pip's record (PEP 610)."""
    import json
    import urllib.parse
    from importlib import metadata

    # Every record of the name: a checkout's own egg-info (no record) may come first on sys.path.
    texts = (dist.read_text("direct_url.json") for dist in metadata.distributions(name=DISTRIBUTION))
    try:
        record = json.loads(next((text for text in texts if text), "{}"))
    except ValueError:
        return None, False
    url = record.get("url", "")
    if not url.startswith("file://"):
        return None, False
    return urllib.parse.unquote(url.removeprefix("file://")), bool(record.get("dir_info", {}).get("editable"))


def is_real(x: object) -> bool:
    # The exact types first: the ABC checks cost microseconds on every episode start.
    return type(x) is float or type(x) is int or (isinstance(x, numbers.Real) and not isinstance(x, bool))


def is_int(x: object) -> bool:
    return type(x) is int or (isinstance(x, numbers.Integral) and not isinstance(x, bool))


def is_bool(x: object) -> bool:
    # numpy's bool (np.bool_, named "bool" in numpy 2) without a numpy import here.
    return type(x) is bool or (type(x).__module__ == "numpy" and type(x).__name__ in ("bool_", "bool"))


HELD_OUT_MEASURES: dict[str, str] = {
    "held_out_distance_error": "D's mean error against the recorded steps from a state to a later achieved goal "
                               "(steps; a recorded path need not be the shortest)",
    "held_out_distance_rank": "rank correlation of D with those recorded steps (1: D orders the goals as the "
                              "recording reached them)",
    "held_out_action_error": "the actor's mean error on the recorded actions, as a fraction of the largest action bound",
    "graph_joined": "the landmarks in the largest strongly connected part of the graph the training episodes support",
}
"""What a run trained from a recording alone (no env) measures on its held-out split in place of
episodes (training/held_out.py), and what each is, as its card says it."""
