"""What a planner option is: one row of the option table (`PlannerConfig`'s fields, core/config.py)
and the rules the table's columns state.

A row gives the option's type (its field's), default, range, one line of doc, whether a client may
set it per episode, the modes it acts in, and the options it makes do nothing when on (in those
modes). From the rows come the config's checks, the ``KEY=VALUE`` parser of planner options, the
planner API page's table (`markdown_table`), the proto's check (tests/test_options.py) and the
cards' labels (`acting`).

Two rules refuse a setting that does nothing:
- a config (a bundle's defaults, a training run's planner, ``l3p export --planner``) may not hold an
  option that every mode it acts in ignores, given another option that is on (`dead_pair`);
- an option a request sets must act in the episode's mode (`Option.check_acts`).
Settings applied over others (``--planner`` over a run's or a bundle's, a request's over a bundle's)
reset what they make do nothing there (`silenced`): only what is set together is refused.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from l3p.core.commandline import did_you_mean
from l3p.core.names import MODES, is_bool, is_int, is_real

_KINDS = {float: "number", int: "int", bool: "bool", str: "choice"}


class OptionValueError(ValueError):
    """A planner option's value outside its range. ``option`` and ``expected`` say what without the
    value: a bundle's refusal never echoes what its manifest holds."""

    def __init__(self, option: str, expected: str, value: Any, hint: str = ""):
        super().__init__(f"{option} must be {expected}, got {value!r}{hint}")
        self.option, self.expected = option, expected


class DeadOptionError(ValueError):
    """A setting that does nothing beside another one (``on``, which makes ``dead`` do nothing). Of the
    values, the message shows only ``on``'s true and the defaults: a bundle's refusal never echoes what
    its manifest holds."""

    def __init__(self, message: str, on: str, dead: str):
        super().__init__(message)
        self.on, self.dead = on, dead


@dataclass(frozen=True)
class Option:
    """One row of the option table."""

    name: str
    kind: str  # "choice", "number", "int" or "bool"
    default: Any
    doc: str  # one line: what it does
    choices: tuple[str, ...] = ()
    low: float = 0.0  # number: > low (or >= low with low_inclusive); int: >= low
    low_inclusive: bool = False
    high: int | None = None  # int: <= high
    per_episode: bool = True  # a request may set it (EpisodeOptions); else only a bundle's defaults
    modes: tuple[str, ...] = MODES  # the planner modes it changes anything in
    excludes: tuple[str, ...] = ()  # options it makes do nothing, when on, in its modes

    def is_on(self, value: Any) -> bool:
        """Set to something (a bool: true); None is unset."""
        return value is not None and (self.kind != "bool" or bool(value))

    def check(self, value: Any) -> None:
        """Raise OptionValueError naming the option, its allowed range and the value."""
        if self.kind == "choice":
            ok = value in self.choices
        elif self.kind == "number":
            ok = is_real(value) and math.isfinite(value) and (value >= self.low if self.low_inclusive
                                                                 else value > self.low)
        elif self.kind == "int":
            ok = is_int(value) and value >= self.low and (self.high is None or value <= self.high)
        else:
            ok = is_bool(value)
        if not ok:
            hint = did_you_mean(value, self.choices) if self.kind == "choice" and isinstance(value, str) else ""
            raise OptionValueError(self.name, self.expected, value, hint)

    @property
    def expected(self) -> str:
        if self.kind == "choice":
            return f"one of {self.choices}"
        if self.kind == "number":
            return f"a finite number {'>=' if self.low_inclusive else '>'} {self.low:g}"
        if self.kind == "int":
            return (f"an integer in [{self.low:g}, {self.high}]" if self.high is not None
                    else f"an integer >= {self.low:g}")
        return "a bool"

    def parse(self, text: str) -> Any:
        """The value written as text (``--planner KEY=VALUE``, ``MODE@KEY=VALUE``), checked."""
        text = text.strip()
        if self.kind == "number":
            value: Any = float(text)
        elif self.kind == "int":
            value = int(text)
        elif self.kind == "bool":
            value = _parse_bool(text)
        else:
            value = text
        self.check(value)
        return value

    def check_mode(self, value: Any, mode: str) -> None:
        """Raise ValueError when turning this option on asks a mode it does nothing in."""
        if mode not in self.modes and self.is_on(value):
            raise ValueError(f"{self.name} applies to mode {' or '.join(self.modes)} only, not "
                             f"{mode}: leave it unset")

    def check_acts(self, value: Any, values: Mapping[str, Any], table: Mapping[str, Option],
                   given: Collection[str]) -> None:
        """Raise ValueError unless this option, set to ``value`` by a request (``given``: the names it
        set), acts in the episode whose settings are ``values``: in its mode, and not beside an option
        that is on there and makes it do nothing."""
        self.check_mode(value, values["mode"])
        if not self.is_on(value):
            return
        for on in table.values():
            if self.name in on.excludes and values["mode"] in on.modes and on.is_on(values[on.name]):
                raise DeadOptionError(dead_message(on, self, values, given), on.name, self.name)


def planner_option(default: Any, doc: str, **row: Any) -> Any:
    """A `PlannerConfig` field: one row of the option table (`Option`'s columns besides name, kind
    and default, which the field gives)."""
    return dataclasses.field(default=default, metadata={"doc": doc, "option": row})


def option_table(config_class: type) -> dict[str, Option]:
    """The rows of the table, in the config's field order; checks that each exclusion names an option."""
    hints = typing.get_type_hints(config_class)
    table = {f.name: Option(f.name, _KINDS[hints[f.name]], f.default, f.metadata["doc"], **f.metadata["option"])
             for f in dataclasses.fields(config_class)}
    for row in table.values():
        unknown = [name for name in row.excludes if name not in table]
        if unknown or (row.excludes and row.kind != "bool"):
            raise TypeError(f"{row.name} excludes {unknown or row.excludes}: bool options exclude known options")
    return table


def dead_pair(values: Mapping[str, Any], table: Mapping[str, Option]) -> tuple[Option, Option] | None:
    """(on, dead): the first option off its default that every mode it acts in ignores, because ``on``
    is on and acts in those modes; None when every setting does something in some mode."""
    for on in table.values():
        if not on.is_on(values[on.name]):
            continue
        for name in on.excludes:
            dead = table[name]
            if values[name] != dead.default and set(dead.modes) <= set(on.modes):
                return on, dead
    return None


def silenced(overrides: Mapping[str, Any], table: Mapping[str, Option]) -> dict[str, Any]:
    """The table's defaults of the options that ``overrides`` turning an option on make do nothing in
    every mode (those not among the overrides): what applying them over other settings resets."""
    return {name: table[name].default for on, value in overrides.items() if on in table and table[on].is_on(value)
            for name in table[on].excludes
            if name not in overrides and set(table[name].modes) <= set(table[on].modes)}


def without_dead(values: Mapping[str, Any], table: Mapping[str, Option]) -> dict[str, Any]:
    """``values`` with every setting `dead_pair` would name back at its default: two configs the
    planner acts alike on, in every mode, give the same dict."""
    out = dict(values)
    while (pair := dead_pair(out, table)) is not None:
        out[pair[1].name] = pair[1].default
    return out


def dead_message(on: Option, dead: Option, values: Mapping[str, Any], given: Collection[str] | None = None) -> str:
    """One line naming both options; ``given`` (the names set here, over defaults set elsewhere) says
    what to do when ``on`` is one of those defaults."""
    line = f"{on.name}={_text(values[on.name])} makes {dead.name} do nothing; drop one"
    if given is None or on.name in given or dead.name not in given:
        return line
    return (f"{line} ({on.name}={_text(values[on.name])} is a default here: drop {dead.name}, or add "
            f"{on.name}={_text(on.default)})")


def acting(values: Mapping[str, Any], table: Mapping[str, Option], mode: str) -> list[str]:
    """The options off their defaults that act in ``mode`` (none beside an option that is on there and
    makes it do nothing), in the table's order: what a served planner adds to the defaults."""
    quiet = {name for on in table.values() if mode in on.modes and on.is_on(values.get(on.name))
             for name in on.excludes}
    return [name for name, row in table.items()
            if name != "mode" and mode in row.modes and name not in quiet
            and name in values and values[name] != row.default]


def markdown_table(table: Mapping[str, Option]) -> str:
    """The planner API page's table of options (docs/planner_api.md; scripts/options_table writes it)."""
    lines = ["| option | type | default | range | modes | per episode | makes do nothing | what it does |",
             "|---|---|---|---|---|---|---|---|"]
    for row in table.values():
        expected = row.expected.removeprefix("a finite ").removeprefix("an ").removeprefix("a ")
        excludes = ", ".join(f"`{name}`" for name in row.excludes)
        modes = "all" if row.modes == MODES else ", ".join(row.modes)
        lines.append(f"| `{row.name}` | {row.kind} | `{_text(row.default)}` | {expected} | {modes} | "
                     f"{'yes' if row.per_episode else 'no (the bundle)'} | {excludes} | {row.doc} |")
    return "\n".join(lines) + "\n"


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)


def _parse_bool(text: str) -> bool:
    try:
        return {"true": True, "false": False}[text.lower()]
    except KeyError:
        raise ValueError(f"expected true or false, got {text!r}") from None
