"""Typed configs as command lines and files.

A command's config is a dataclass whose fields are declared with `option` (type, default and help
written once). `add_config_arguments` builds the command's argparse options from it, plus
``--config FILE``; `config_from_args` reads that file (TOML, or JSON such as the ``config.json`` a
training run writes) and lets the options given on the command line override it. A file's values
go through the same parsers as the command line's text, so they are checked alike; an unknown key
is an error naming the keys there are. Standard library only: every install profile lists every
command's options (``l3p COMMAND --help``), whether or not the command's extra is installed.

The same checks serve configs that are not command lines (the training config, read from a file or
``--set KEY=VALUE``): `check_values` checks a mapping against a dataclass's field types, and every
error names the key, the value and the expected type, with a did-you-mean for an unknown key.
`documented` gives such a field its help, which `describe_config` lists.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from l3p.core.errors import L3PError

CONFIG_DEST = "config"


class ConfigError(L3PError, ValueError):
    """A config file or an option value cannot be used; the message names the key or the option."""


def option(default: Any, help: str, *, parse: Callable[[str], Any] | None = None, metavar: str | None = None,
           choices: tuple[str, ...] | None = None, flag: str | None = None, short: str | None = None,
           group: str | None = None, show_default: bool = True, comma_separated: bool = False) -> Any:
    """A config field that is also a command-line option (``--field-name`` unless ``flag``).

    ``parse``: text -> value, raising ValueError (or argparse.ArgumentTypeError) with the reason;
    default: the field's type. A ``tuple[T, ...]`` field is a repeatable option (each value
    parsed); with ``comma_separated`` it is one text (``l3p,naive``) that ``parse`` turns into the
    whole tuple (a file may give a list). A bool field
    is a switch (``--x``; ``--x/--no-x`` when it defaults to True). ``short``: a one-letter flag
    beside it (``-v``). ``group``: the --help section."""
    return dataclasses.field(default=default, metadata={
        "help": help, "parse": parse, "metavar": metavar, "choices": choices, "flag": flag, "short": short,
        "group": group, "show_default": show_default, "comma_separated": comma_separated})


@dataclasses.dataclass(frozen=True)
class _Spec:
    name: str
    flag: str
    kind: type  # the value type: bool, int, float, str, Path, or the parse function's
    optional: bool  # None is a value
    repeated: bool  # tuple[T, ...]
    whole: bool  # repeated, but parse turns one text into the whole tuple
    default: Any
    meta: Mapping[str, Any]

    @property
    def flags(self) -> tuple[str, ...]:
        return (self.meta["short"], self.flag) if self.meta.get("short") else (self.flag,)

    def from_text(self, text: str) -> Any:
        parse = self.meta["parse"] or self.kind
        try:
            value = parse(text)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
            message = str(exc)
            if message.startswith(("invalid literal for int()", "could not convert string to float")):
                message = f"expected {'an integer' if 'int()' in message else 'a number'}, got {text!r}"
            raise ValueError(message or f"invalid value {text!r}") from None
        choices = self.meta["choices"]
        if choices is not None and value not in choices:
            raise ValueError(f"expected one of {', '.join(map(str, choices))}, got {text!r}")
        return value

    def from_file(self, value: Any) -> Any:
        """A file's value as the command line would have given it (type checked, parsed)."""
        if value is None:
            if self.optional:
                return None
            raise ValueError("may not be null")
        if self.repeated:
            if self.whole:
                items = value if isinstance(value, list) else [value]
                return tuple(self.from_text(",".join(map(str, items))))
            if not isinstance(value, list):
                raise ValueError(f"expected a list, got {value!r}")
            return tuple(self._scalar(item) for item in value)
        return self._scalar(value)

    def _scalar(self, value: Any) -> Any:
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"expected true or false, got {value!r}")
            return value
        if isinstance(value, (dict, list)) or (isinstance(value, bool) and self.kind is not str):
            raise ValueError(f"expected {type_text(self.kind)}, got {value!r}")
        if isinstance(value, float) and self.kind is int:
            raise ValueError(f"expected an integer, got {value!r}")
        return self.from_text(str(value))


def _specs(cls: type) -> list[_Spec]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        if "help" not in f.metadata:
            continue
        kind, optional, repeated = hints[f.name], False, False
        args = typing.get_args(kind)
        if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
            optional, kind = True, next(a for a in args if a is not type(None))
            args = typing.get_args(kind)
        if typing.get_origin(kind) is tuple and len(args) == 2 and args[1] is Ellipsis:
            repeated, kind = True, args[0]
        if typing.get_origin(kind) is not None:  # e.g. tuple[str, str] items: parse makes them
            kind = typing.get_origin(kind)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        whole = repeated and f.metadata["comma_separated"]
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        specs.append(_Spec(f.name, flag, kind, optional, repeated, whole, default, f.metadata))
    return specs


def _default_text(spec: _Spec) -> str | None:
    value = spec.default
    if not spec.meta["show_default"] or value is None or value == () or spec.kind is bool:
        return None
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_config_arguments(parser: argparse.ArgumentParser, cls: type, config_file: bool = True) -> None:
    """``--config FILE`` and an option per field of ``cls``. Every option defaults to "not given"
    (argparse.SUPPRESS), so `config_from_args` can tell the command line from the file. Without
    ``config_file``: no --config, and the options default to the fields' defaults (a plain
    namespace for a command that is not built from a config)."""
    if config_file:
        parser.add_argument("--config", dest=CONFIG_DEST, type=Path, metavar="FILE", default=None,
                            help="read options from this TOML or JSON file (keys: the option names, "
                                 "with _ for -); options given here override it")
    groups: dict[str, argparse._ArgumentGroup] = {}
    for spec in _specs(cls):
        where = parser
        if spec.meta["group"]:
            where = groups.setdefault(spec.meta["group"], parser.add_argument_group(spec.meta["group"]))
        default = _default_text(spec)
        help_text = spec.meta["help"] + (f" (default {default})" if default is not None else "")
        common = dict(dest=spec.name, default=argparse.SUPPRESS if config_file else spec.default, help=help_text)
        if spec.kind is bool:
            action = argparse.BooleanOptionalAction if spec.default else "store_true"
            where.add_argument(*spec.flags, action=action, **common)
            continue
        metavar = spec.meta["metavar"] or (spec.name.upper() if spec.meta["choices"] is None else None)
        where.add_argument(*spec.flags, type=_argparse_type(spec), metavar=metavar, choices=spec.meta["choices"],
                           action="append" if spec.repeated and not spec.whole else "store", **common)


def _argparse_type(spec: _Spec) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = spec.from_text(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return tuple(value) if spec.whole else value

    convert.__name__ = spec.kind.__name__  # argparse names the type in "invalid int value"
    return convert


def read_config_file(path: Path) -> dict[str, Any]:
    """The mapping in a TOML (``.toml``) or JSON file; ConfigError names the file and the problem."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    try:
        if path.suffix == ".json":
            mapping = json.loads(data)
        else:
            mapping = tomllib.loads(data.decode())
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        kind = "JSON" if path.suffix == ".json" else "TOML (name it .json for JSON)"
        raise ConfigError(f"config file {path}: not valid {kind}: {exc}") from None
    if not isinstance(mapping, dict):
        raise ConfigError(f"config file {path}: expected a table of options, got {type(mapping).__name__}")
    return mapping


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known word closest to ``word``, or ``""``."""
    close = difflib.get_close_matches(word.replace("-", "_"), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_keys_error(where: str, unknown: list[str], known: list[str], listing: str | None = None) -> ConfigError:
    """``listing``: where to find the keys, instead of listing them all."""
    hints = [f"{key!r}{did_you_mean(key, known)}" for key in unknown]
    return ConfigError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
                       + (listing or f"the keys are: {', '.join(known)}"))


def config_values(cls: type, mapping: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A file's mapping as ``cls`` field values, each checked as the command line checks it."""
    specs = {spec.name: spec for spec in _specs(cls)}
    keys = {key.replace("-", "_"): key for key in mapping}
    unknown = sorted(key for key, name in ((k, k.replace("-", "_")) for k in mapping) if name not in specs)
    if unknown:
        raise unknown_keys_error(where, unknown, list(specs))
    values = {}
    for name, key in keys.items():
        try:
            values[name] = specs[name].from_file(mapping[key])
        except ValueError as exc:
            raise ConfigError(f"{where}: {key}: {exc}") from None
    return values


def config_from_args(cls: type, args: argparse.Namespace) -> Any:
    """``cls`` from its defaults, then the ``--config`` file, then the options given on the command
    line; ConfigError (one line) if the file or the result is not a usable config."""
    values: dict[str, Any] = {}
    path = getattr(args, CONFIG_DEST, None)
    if path is not None:
        values = config_values(cls, read_config_file(path), f"config file {path}")
    given = {spec.name: tuple(getattr(args, spec.name)) if spec.repeated else getattr(args, spec.name)
             for spec in _specs(cls) if hasattr(args, spec.name)}
    return build(cls, {**values, **given})


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """``cls(**values)``; the config's own checks (``__post_init__``) become a ConfigError."""
    try:
        return cls(**values)
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None


def parse_config(cls: type, argv: list[str] | None = None, prog: str | None = None,
                 description: str | None = None) -> Any:
    """``cls`` from a command line (``--config FILE`` and options): for entry points outside ``l3p``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_config_arguments(parser, cls)
    return config_from_args(cls, parser.parse_args(argv))


def _at(where: str, key: str) -> str:
    """``--set n_envs`` for an option, ``config file f.toml: n_envs`` for a file."""
    return f"{where} {key}" if where.startswith("-") else f"{where}: {key}"


def type_text(hint: Any) -> str:
    """How a field's type reads in a message: ``an integer``, ``a number or null``, ..."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        return " or ".join(type_text(a) for a in args if a is not type(None)) + " or null"
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if hint in names:
        return names[hint]
    if dataclasses.is_dataclass(hint):
        return f"a table of {hint.__name__} keys"
    return getattr(hint, "__name__", str(hint))


def _fits(value: Any, hint: Any) -> bool:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # an integer is a number (a file's 1 for 1.0)
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if dataclasses.is_dataclass(hint):
        return isinstance(value, (dict, hint))
    return True  # a type this check does not know: the config's own checks decide


def check_values(cls: type, mapping: Mapping[str, Any], where: str, also: Iterable[str] = (),
                 listing: str | None = None) -> None:
    """Raise ConfigError unless every key of ``mapping`` is a field of the dataclass ``cls`` (or in
    ``also``: keys checked elsewhere) holding a value of the field's type. The message names the key,
    the value and the expected type; an unknown key gets the closest known key."""
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)] + [k for k in also if k not in hints]
    if unknown := [key for key in mapping if key not in known]:
        raise unknown_keys_error(where, unknown, known, listing)
    for key, value in mapping.items():
        if key in hints and not _fits(value, hints[key]):
            raise ConfigError(f"{_at(where, key)}: expected {type_text(hints[key])}, got {value!r}")


def documented(default: Any, doc: str) -> Any:
    """A config field with its help (which `describe_config` lists); a nested config as its default
    goes through a factory, as dataclasses require."""
    if dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=lambda: default, metadata={"doc": doc})
    return dataclasses.field(default=default, metadata={"doc": doc})


def describe_config(config: Any, docs: Mapping[str, str] | None = None, skip: Iterable[str] = ()) -> list[str]:
    """Lines per field of a dataclass instance: ``key = value  (type)`` and its help below (a
    ``documented`` field's, an `option`'s, else ``docs[key]``); a nested config's fields in its
    place, under their own keys; ``skip``: keys left out."""
    hints = typing.get_type_hints(type(config))
    lines = []
    for f in dataclasses.fields(config):
        if f.name in skip:
            continue
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            lines += describe_config(value, docs, skip)
            continue
        doc = f.metadata.get("doc") or f.metadata.get("help") or (docs or {}).get(f.name, "")
        shown = json.dumps(str(value) if isinstance(value, Path) else value)
        lines.append(f"{f.name} = {shown}  ({type_text(hints[f.name])})")
        lines += [f"    {doc}"] if doc else []
    return lines
