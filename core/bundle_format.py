"""The model bundle's format (docs/bundle.md), shared by the exporter and the loader: the
manifest's fields and their checks, each graph's signature, the bundle digest, and how a bundle's
files are read (``BundleDir``: never through a link, each checked as opened).

A refusal names the file, the field and what was expected, never what was found: a value read from
a file that is refused, or cannot be parsed, is not echoed (clients read refusals, and the file may
hold what they must not see).

numpy-free: the loader (onnxruntime) and the exporter (torch, onnx) build on this.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from l3p.core.config import OPTIONS, PlannerConfig
from l3p.core.errors import L3PError
from l3p.core.options import DeadOptionError, OptionValueError, without_dead

FORMAT = "l3p-bundle"
FORMAT_VERSION = 1
GRAPHS = ("actor", "distance", "value", "landmarks")
MANIFEST = "manifest.json"
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""A served model's name: a repository folder's, what requests name, and what a signature names."""
# A manifest is a few kB; a bigger one is refused before it is parsed (it bounds the memory and
# time an untrusted bundle can make the loader spend).
MAX_MANIFEST_BYTES = 1 << 20
# A graph file bigger than this is refused before it is read (onnxruntime takes it whole). The
# shipped graphs are about 1 MB; `l3p serve --max-file-bytes` changes it.
DEFAULT_MAX_FILE_BYTES = 256 << 20
_READ_CHUNK = 1 << 20
# Opened non-blocking: a FIFO or device put where a file should be never blocks a read.
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOT_READ = {False: "not a regular file; refusing to read it",
             True: "which is never followed; refusing to read it"}
_HARD_LINKED = "which is never read (another of its names may be a file outside the bundle): copy the file in"


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


def escaped(value: object) -> str:
    """A string read from a file or a directory listing as a message carries it: non-ASCII and
    control characters escaped (no terminal escape, no line break, no look-alike letter)."""
    return ascii(str(value))[1:-1]


def printable(message: str) -> str:
    """A whole message kept on one line: every unprintable character (control, line or
    paragraph separator, bidi override) escaped; printable text is left as it is."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in message)


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return kind
    return "not a plain file"


def _chunks(fd: int, max_bytes: int, shown_as: str) -> Iterator[bytes]:
    """The bytes of the open file ``fd``, a regular file (checked with fstat) of at most
    ``max_bytes`` whatever it grows to meanwhile, in chunks of at most _READ_CHUNK."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise BundleError(f"{shown_as}: {_kind(info.st_mode)}, {_NOT_READ[False]}")
    if info.st_size > max_bytes:
        raise BundleError(f"{shown_as}: {info.st_size} bytes, over the cap of {max_bytes} bytes per file")
    size = 0
    while chunk := os.read(fd, min(_READ_CHUNK, max_bytes + 1 - size)):
        size += len(chunk)
        if size > max_bytes:
            raise BundleError(f"{shown_as}: grew past the cap of {max_bytes} bytes per file while read")
        yield chunk


def read_regular(file: Path, max_bytes: int, shown: str) -> bytes:
    """The bytes of ``file``, a path the operator gave (a link there is followed), if it is a
    regular file of at most ``max_bytes``. Looked at before it is opened, opened non-blocking and
    checked again on the open descriptor, so a FIFO, device or socket is refused without a
    blocking read. ``shown`` names the file in errors (BundleError); FileNotFoundError passes
    through."""
    try:
        mode = os.stat(file).st_mode
        if not stat.S_ISREG(mode):
            raise BundleError(f"{shown}: {_kind(mode)}, {_NOT_READ[False]}")
        fd = os.open(file, _FILE_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BundleError(f"{shown}: cannot open it ({exc.strerror})") from None
    try:
        return b"".join(_chunks(fd, max_bytes, shown))
    except OSError as exc:
        raise BundleError(f"{shown}: cannot read it ({exc.strerror})") from None
    finally:
        os.close(fd)


class BundleDir:
    """An open bundle directory. Everything in it is opened relative to this descriptor with
    O_NOFOLLOW, checked as opened (fstat) and read from that descriptor: a name swapped for a
    symbolic link, or a directory renamed, between a check and a read cannot redirect the read.
    ``path`` is for logs; ``where`` names the bundle in errors."""

    def __init__(self, fd: int, path: Path, where: str):
        self.fd, self.path, self.where = fd, path, where

    @classmethod
    def open(cls, path: str | Path, where: str | None = None, below: tuple[str, ...] = ()) -> BundleDir:
        """``path`` (given by the operator: a link there is followed), then each of the names
        ``below`` it in turn, none of which may be a symbolic link; BundleError if one is missing,
        not a directory, or a link."""
        path = Path(path)
        where = str(path.joinpath(*below)) if where is None else where
        try:
            fd = os.open(path, _DIR_FLAGS)
        except OSError as exc:
            raise BundleError(f"bundle {where}: not a directory ({exc.strerror})") from None
        for name in below:
            try:
                inner = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                link = exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, name)
                os.close(fd)
                if link:
                    raise BundleError(f"bundle {where}: {escaped(name)} is a symbolic link, which is never "
                                      "followed; copy the bundle in") from None
                raise BundleError(f"bundle {where}: not a directory ({exc.strerror})") from None
            os.close(fd)
            fd = inner
        return cls(fd, path.joinpath(*below), where)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> BundleDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self, name: str) -> int:
        """A regular file directly in the bundle, never through a link: its entry is looked at
        first, so a link, FIFO or device is refused unopened, and opened with O_NOFOLLOW, so a
        symbolic link swapped in since is refused too; what was opened is checked again (fstat).
        A file with more than one name (a hard link) is refused like a symbolic link: its other
        name may be a file outside the bundle. FileNotFoundError passes through."""
        shown_as = f"{self.where}/{escaped(name)}"
        try:
            _check_entry(os.stat(name, dir_fd=self.fd, follow_symlinks=False), shown_as)
            fd = os.open(name, _FILE_FLAGS | os.O_NOFOLLOW, dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise BundleError(f"{shown_as}: a symbolic link, {_NOT_READ[True]}") from None
            raise BundleError(f"{shown_as}: cannot open it ({exc.strerror})") from None
        except ValueError:  # a name no file can have
            raise BundleError(f"{shown_as}: cannot open it (not a file name)") from None
        try:
            _check_entry(os.fstat(fd), shown_as)  # what was opened: a link made since the look is refused too
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read(self, name: str, max_bytes: int) -> bytes:
        """The bytes of regular file ``name`` in the bundle, at most ``max_bytes``; BundleError
        otherwise, FileNotFoundError if it is absent."""
        shown_as = f"{self.where}/{escaped(name)}"
        fd = self._open(name)
        try:
            return b"".join(_chunks(fd, max_bytes, shown_as))
        except OSError as exc:
            raise BundleError(f"{shown_as}: cannot read it ({exc.strerror})") from None
        finally:
            os.close(fd)

    def read_hashed(self, name: str, max_bytes: int, sha256: str) -> bytes:
        """The bytes of regular file ``name`` if their sha256 is ``sha256``. The file is hashed as
        it streams through a small buffer, so one that does not match is refused without being
        held in memory; one that matches is read once more, whole, and those very bytes are
        hashed again (a file rewritten in between is refused)."""
        shown_as = f"{self.where}/{escaped(name)}"
        fd = self._open(name)
        try:
            streamed, size = hashlib.sha256(), 0
            for chunk in _chunks(fd, max_bytes, shown_as):
                streamed.update(chunk)
                size += len(chunk)
            _match(streamed.hexdigest(), sha256, shown_as)
            data = os.pread(fd, size + 1, 0)
            while len(data) < size + 1 and (more := os.pread(fd, size + 1 - len(data), len(data))):
                data += more
            _match(hashlib.sha256(data).hexdigest(), sha256, shown_as)
            return data
        except OSError as exc:
            raise BundleError(f"{shown_as}: cannot read it ({exc.strerror})") from None
        finally:
            os.close(fd)

    def stat(self, name: str) -> os.stat_result | None:
        """The entry ``name`` itself (a link is not followed); None if there is none."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except (OSError, ValueError):  # absent, unreadable, or a name no file can have
            return None


def _check_entry(info: os.stat_result, shown_as: str) -> None:
    """BundleError unless ``info`` is a regular file with one name."""
    if not stat.S_ISREG(info.st_mode):
        raise BundleError(f"{shown_as}: {_kind(info.st_mode)}, {_NOT_READ[stat.S_ISLNK(info.st_mode)]}")
    if info.st_nlink > 1:
        raise BundleError(f"{shown_as}: a file with {info.st_nlink} hard links, {_HARD_LINKED}")


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _match(digest: str, expected: str, shown_as: str) -> None:
    if digest != expected:
        raise BundleError(f"{shown_as}: sha256 does not match {MANIFEST} ({escaped(expected)[:64]})")


def read_manifest(bundle: str | Path | BundleDir, where: str | None = None) -> dict:
    """The bundle's manifest, its fields checked; BundleError names the first problem (the
    bundle as ``where``, default its path). ``bundle``: an open BundleDir, or a directory path
    (opened here)."""
    if not isinstance(bundle, BundleDir):
        with BundleDir.open(bundle, where) as opened:
            return read_manifest(opened)
    file = f"{bundle.where}/{MANIFEST}"
    try:
        manifest = json.loads(bundle.read(MANIFEST, MAX_MANIFEST_BYTES).decode())
    except FileNotFoundError:
        raise BundleError(f"bundle {bundle.where}: {MANIFEST} is missing") from None
    except RecursionError:  # nesting deeper than the parser's stack: not a manifest
        raise BundleError(f"{file}: not readable JSON (nested too deeply)") from None
    except ValueError as exc:  # bad JSON, bad UTF-8, an over-long integer
        raise BundleError(f"{file}: not readable JSON ({problem(exc)})") from None
    if not isinstance(manifest, dict):
        raise BundleError(f"{file}: expected a JSON object")

    def bad(field: str, expected: str) -> BundleError:
        return BundleError(f"{file}: '{field}' is not {expected}")

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
        if entry["path"] in ("", ".", "..") or "/" in entry["path"] or "\0" in entry["path"]:
            raise bad(f"files.{name}.path", "a file name directly in the bundle directory (a path that "
                                            "leaves the bundle directory or enters a subdirectory is refused)")
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
        raise BundleError(f"{where}/{MANIFEST}: cannot be digested ({problem(exc)})") from None
    if expected is not None and digest != expected.lower():
        raise BundleError(f"bundle {where} has digest {digest}, not the pinned {source} {expected}; "
                          "refusing to serve it")
    return digest


def problem(exc: BaseException) -> str:
    """Why a file could not be parsed, as a refusal says it: the exception's first line, which
    quotes nothing of the file, but for a UnicodeDecodeError's (it quotes the byte): its offset."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start}"
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def planner_defaults(manifest: dict, overrides: Mapping[str, Any] | None = None) -> PlannerConfig:
    """The manifest's served planner defaults, validated; with ``overrides`` (a rebundle's), the
    defaults they make, whose errors (ValueError, naming the option) are the overrides' to report."""
    try:
        config = PlannerConfig(**manifest["planner"])
    except TypeError:  # a name that is no field of PlannerConfig
        options = ", ".join(field.name for field in dataclasses.fields(PlannerConfig))
        raise BundleError(f"{MANIFEST}: 'planner' holds a name that is no planner option ({options})") from None
    if overrides is not None:
        return config.replace(**overrides)
    try:
        config.validate()
    except OptionValueError as exc:
        raise BundleError(f"{MANIFEST}: 'planner.{exc.option}' is not {exc.expected}") from None
    except DeadOptionError as exc:
        values = dataclasses.asdict(config)
        mended = without_dead(values, OPTIONS)
        dead = [name for name, value in mended.items() if value != values[name]]
        fix = " ".join(f"{name}={json.dumps(mended[name])}" for name in dead)
        raise BundleError(f"{MANIFEST}: 'planner' serves {', '.join(dead)} beside {exc.on}=true, which makes "
                          f"{'them' if len(dead) > 1 else 'it'} do nothing; rebundle it without: "
                          f"l3p export BUNDLE OUT --planner {fix}") from None
    return config


def supported_edges(manifest: dict) -> np.ndarray | None:
    """The landmark graph's data-supported edges (manifest ``edges.supported``: [i, j] pairs, landmark
    i -> j) as a mask [N, N]; None when the bundle keeps every edge (no ``edges``)."""
    if "edges" not in manifest:
        return None
    n = manifest["n_landmarks"]
    pairs = manifest["edges"].get("supported") if isinstance(manifest["edges"], dict) else None
    ok = isinstance(pairs, list) and all(
        isinstance(p, list) and len(p) == 2 and all(_is_int(v) and 0 <= v < n for v in p) and p[0] != p[1]
        for p in pairs)
    if not ok:
        raise BundleError(f"{MANIFEST}: 'edges.supported' must be a list of [i, j] landmark pairs, i != j, "
                          f"each in [0, {n})")
    mask = np.zeros((n, n), bool)
    if pairs:
        index = np.asarray(pairs, np.int64)
        mask[index[:, 0], index[:, 1]] = True
    return mask


def read_graph(bundle: BundleDir, entry: dict, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """A graph file's bytes: a regular file directly in the bundle, at most ``max_bytes``,
    matching its manifest sha256 (hashed as it is read)."""
    try:
        return bundle.read_hashed(entry["path"], max_bytes, entry["sha256"])
    except FileNotFoundError:
        raise BundleError(f"bundle {bundle.where}: {escaped(entry['path'])} is missing") from None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
