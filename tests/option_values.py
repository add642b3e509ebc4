"""Option values for tests, made from the option table (PlannerConfig's fields): a test that lists
options reads them here, so an option added to the table is in every such list."""
from __future__ import annotations

from typing import Any

from l3p.core.config import EPISODE_OPTIONS, OPTIONS


def example(name: str) -> Any:
    """A value in the option's range, off its default."""
    row = OPTIONS[name]
    if row.kind == "bool":
        return not row.default
    if row.kind == "choice":
        return next(c for c in row.choices if c != row.default)
    if row.kind == "int":
        return row.default + 1 if row.high is None or row.default < row.high else row.default - 1
    return row.default / 2 if row.default / 2 > row.low else row.default * 2


def examples(names=EPISODE_OPTIONS) -> dict[str, Any]:
    """An example value for each of ``names`` that acts beside the others in mode l3p: an option that
    another one, turned on here, makes do nothing is left out."""
    values = {name: example(name) for name in names}
    silenced = {dead for on, value in values.items() if OPTIONS[on].is_on(value) for dead in OPTIONS[on].excludes}
    return {name: value for name, value in values.items() if name not in silenced}


def exclusions() -> list[tuple[str, str]]:
    """Every (on, dead) pair of the table: ``on``, turned on, makes ``dead`` do nothing in its modes."""
    return [(on, dead) for on, row in OPTIONS.items() for dead in row.excludes]
