"""``key=value`` overrides (``--set``, ``--planner``): values parse as JSON, else stay strings."""

from __future__ import annotations

import json
from typing import Any

from l3p.core.errors import L3PError


class OverrideError(L3PError):
    pass


def parse_overrides(pairs: list[str], flag: str = "--set") -> dict[str, Any]:
    """``["batch_size=512", "search=hard"]`` -> ``{"batch_size": 512, "search": "hard"}``."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise OverrideError(f"{flag} expects key=value, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw  # bare strings such as search=hard
    return out
