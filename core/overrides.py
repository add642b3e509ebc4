"""The one ``KEY=VALUE`` parser: every setting written as a pair (``--set``, ``--planner``,
``MODE@KEY=VALUE``, a bridge's ``--set``, ``--openpi-key ROLE=KEY``, ``--model-sha256 NAME=HEX``)
is split and checked by `parse_pair`; what a value means is its caller's (JSON, YAML, a planner
option's row, a digest)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from l3p.core.commandline import did_you_mean
from l3p.core.errors import L3PError


class OverrideError(L3PError, ValueError):
    pass


def text_value(key: str, text: str) -> str:
    return text


def json_value(key: str, text: str) -> Any:
    """JSON, else the text itself (bare strings such as search=hard)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_pair(text: str, value: Callable[[str, str], Any] = text_value, *, keys: Collection[str] | None = None,
               form: str = "KEY=VALUE", flag: str | None = None) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (key, ``value(key, text after the first "=")``). OverrideError (a ValueError)
    names ``flag`` and the ``form`` expected, the ``keys`` allowed (with the closest one), or the
    key and why ``value`` refused its text."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or (keys is not None and key not in keys):
        word = form.partition("=")[0]
        allowed = f" with {word} one of {', '.join(keys)}" if keys is not None else ""
        hint = did_you_mean(key, keys) if keys is not None else ""
        raise OverrideError(f"{flag + ' expects' if flag else 'expected'} {form}{allowed}, got {text!r}{hint}")
    try:
        return key, value(key, raw)
    except ValueError as exc:
        raise OverrideError(f"{flag + ': ' if flag else ''}bad value for {key}: {raw!r} ({exc})") from None


def parse_overrides(pairs: list[str], flag: str = "--set") -> dict[str, Any]:
    """``["batch_size=512", "search=hard"]`` -> ``{"batch_size": 512, "search": "hard"}``."""
    return dict(parse_pair(pair, json_value, form="key=value", flag=flag) for pair in pairs)
