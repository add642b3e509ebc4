"""The model bundle's format (docs/bundle.md), shared by the exporter and the loader: the
manifest's fields and their checks, each graph's signature, and the bundle digest.

numpy-free: the loader (onnxruntime) and the exporter (torch, onnx) build on this.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from pathlib import Path

from l3p.core.config import PlannerConfig
from l3p.core.errors import L3PError

FORMAT = "l3p-bundle"
FORMAT_VERSION = 1
GRAPHS = ("actor", "distance", "value", "landmarks")
MANIFEST = "manifest.json"
# A manifest is a few kB; a bigger one is refused before it is parsed (it bounds the memory and
# time an untrusted bundle can make the loader spend).
MAX_MANIFEST_BYTES = 1 << 20
# A graph file bigger than this is refused before it is read (it is read whole to be hashed). The
# shipped graphs are about 1 MB; `l3p serve --max-file-bytes` changes it.
DEFAULT_MAX_FILE_BYTES = 256 << 20
_READ_CHUNK = 1 << 20


class BundleError(L3PError):
    """The bundle cannot be served; the message says which file and why."""


def graph_file(name: str) -> str:
    """The file name the exporter gives graph `name` (the manifest records it)."""
    return f"{name}.onnx"


def graph_signatures(dims: dict) -> dict[str, tuple[list[tuple[str, int]], list[tuple[str, int | None]]]]:
    """Per graph: (input name, width) and (output name, width, or None for a [B] vector)."""
    obs, goal, action = dims["obs"], dims["goal"], dims["action"]
    return {
        "actor": ([("obs", obs), ("goal", goal)], [("action", action)]),
        "distance": ([("obs", obs), ("goal", goal)], [("distance", None), ("action", action)]),
        "value": ([("goal_a", goal), ("goal_b", goal)], [("value", None)]),
        "landmarks": ([], [("landmarks", goal)]),
    }


def shape_matches(shape: list, want: list) -> bool:
    """ONNX shapes hold ints, symbolic names (str) or None (unknown); 'B' wants a symbolic axis."""
    if len(shape) != len(want):
        return False
    for have, need in zip(shape, want):
        if need == "B":
            if isinstance(have, int):  # a fixed batch size cannot take N + 1 candidates
                return False
        elif isinstance(have, int) and have != need:
            return False
    return True


def bundle_digest(manifest: dict) -> str:
    """sha256 of the manifest as canonical JSON (sorted keys, no spaces). The manifest holds each
    file's sha256, so the digest pins the graphs and everything served with them (dims, action
    bounds, planner defaults, provenance); `l3p serve --bundle-sha256` checks it."""
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "not a plain file"


def read_regular(file: Path, max_bytes: int, shown: str) -> bytes:
    """The bytes of ``file`` if it is a regular file of at most ``max_bytes``. Nothing else is
    opened or waited on: a FIFO, device or socket is refused (checked before opening, and on the
    open descriptor, which is opened non-blocking), and no more than ``max_bytes`` are read
    whatever the file grows to meanwhile. ``shown`` names the file in errors (BundleError);
    FileNotFoundError passes through."""
    try:
        mode = os.stat(file).st_mode
        if not stat.S_ISREG(mode):
            raise BundleError(f"{shown}: {_kind(mode)}, not a regular file; refusing to read it")
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BundleError(f"{shown}: cannot open it ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced between the check and the open
            raise BundleError(f"{shown}: {_kind(info.st_mode)}, not a regular file; refusing to read it")
        if info.st_size > max_bytes:
            raise BundleError(f"{shown}: {info.st_size} bytes, over the cap of {max_bytes} bytes per file")
        chunks, size = [], 0
        while chunk := os.read(fd, min(_READ_CHUNK, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise BundleError(f"{shown}: grew past the cap of {max_bytes} bytes per file while read")
        return b"".join(chunks)
    except OSError as exc:
        raise BundleError(f"{shown}: cannot read it ({exc.strerror})") from None
    finally:
        os.close(fd)


def read_manifest(path: Path, shown: str | None = None) -> dict:
    """The bundle directory's manifest, its fields checked; BundleError names the first problem
    (the bundle as ``shown``, default its path)."""
    path = Path(path)
    where = str(path) if shown is None else shown
    if not path.is_dir():
        raise BundleError(f"bundle {where}: not a directory")
    file = f"{where}/{MANIFEST}"
    try:
        data = read_regular(path / MANIFEST, MAX_MANIFEST_BYTES, file)
        manifest = json.loads(data.decode())
    except FileNotFoundError:
        raise BundleError(f"bundle {where}: {MANIFEST} is missing") from None
    except RecursionError:  # nesting deeper than the parser's stack: not a manifest
        raise BundleError(f"{file}: not readable JSON (nested too deeply)") from None
    except (OSError, ValueError) as exc:  # ValueError: bad JSON, bad UTF-8, an over-long integer
        raise BundleError(f"{file}: not readable JSON ({_first_line(exc)})") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{file}: expected a JSON object")

    def bad(field: str, expected: str) -> BundleError:
        value = manifest
        for key in field.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        return BundleError(f"{file}: '{field}' is {value!r}, expected {expected}")

    if manifest.get("format") != FORMAT:
        raise bad("format", repr(FORMAT))
    if manifest.get("format_version") != FORMAT_VERSION:
        raise bad("format_version", f"{FORMAT_VERSION} (the version this server reads)")
    if not isinstance(manifest.get("env_id"), str) or not manifest["env_id"]:
        raise bad("env_id", "a non-empty string")
    if not isinstance(manifest.get("dims"), dict):
        raise bad("dims", 'an object {"obs", "goal", "action"}')
    for key in ("obs", "goal", "action"):
        if not _is_positive_int(manifest["dims"].get(key)):
            raise bad(f"dims.{key}", "a positive integer")
    for key in ("action_low", "action_high"):
        bounds = manifest.get(key)
        if (
            not isinstance(bounds, list)
            or len(bounds) != manifest["dims"]["action"]
            or not all(_is_finite_number(b) for b in bounds)
        ):
            raise bad(key, f"a list of {manifest['dims']['action']} finite numbers (dims.action)")
    if not _is_finite_number(manifest.get("gamma")) or not 0 < manifest["gamma"] < 1:
        raise bad("gamma", "a number in (0, 1)")
    if not _is_positive_int(manifest.get("n_landmarks")):
        raise bad("n_landmarks", "a positive integer")
    if not isinstance(manifest.get("planner"), dict):
        raise bad("planner", "an object of planner defaults")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise bad("files", f"an object with entries {', '.join(GRAPHS)}")
    for name in GRAPHS:
        entry = files.get(name)
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("sha256"), str)
        ):
            raise bad(f"files.{name}", '{"path": ..., "sha256": ...}')
    return manifest


def check_pin(path: Path, manifest: dict, expected: str | None, source: str = "--bundle-sha256",
              shown: str | None = None) -> str:
    """The manifest's digest; BundleError unless it is ``expected`` (when given). Called right
    after the manifest is read (``source`` names where the pin came from in the message, ``shown``
    the bundle), before any graph is opened: a bundle that is not the pinned one never reaches
    onnxruntime."""
    where = str(path) if shown is None else shown
    try:
        digest = bundle_digest(manifest)
    except (RecursionError, ValueError) as exc:
        raise BundleError(f"{where}/{MANIFEST}: cannot be digested ({_first_line(exc)})") from None
    if expected is not None and digest != expected.lower():
        raise BundleError(f"bundle {where} has digest {digest}, not the pinned {source} {expected}; "
                          "refusing to serve it")
    return digest


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def planner_defaults(manifest: dict) -> PlannerConfig:
    """The manifest's served planner defaults, validated."""
    try:
        config = PlannerConfig(**manifest["planner"])
        config.validate()
    except (TypeError, ValueError) as exc:
        raise BundleError(f"{MANIFEST}: 'planner' is invalid: {exc}") from None
    return config


def read_graph(root: Path, entry: dict, max_bytes: int = DEFAULT_MAX_FILE_BYTES,
               shown: str | None = None) -> bytes:
    """A graph file's bytes, inside the bundle, a regular file of at most ``max_bytes``, and
    matching its manifest sha256 (the bundle named ``shown`` in errors, default its path)."""
    where = str(root) if shown is None else shown
    file = (root / entry["path"]).resolve()
    if root.resolve() not in file.parents:
        raise BundleError(f"{where}/{MANIFEST}: file path {entry['path']!r} leaves the bundle directory")
    try:
        data = read_regular(file, max_bytes, f"{where}/{entry['path']}")
    except FileNotFoundError:
        raise BundleError(f"bundle {where}: {entry['path']} is missing") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise BundleError(
            f"{where}/{entry['path']}: sha256 {digest} does not match {MANIFEST} ({entry['sha256']})"
        )
    return data


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
