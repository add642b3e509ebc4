"""What a model repository holds: its models, the version of each that should serve, and what
is refused before anything is read.

    DIR/NAME/manifest.json              a model NAME (one version, named "")
    DIR/NAME/VERSION/manifest.json      a model NAME in versions; the highest VERSION serves

A version is a directory named by a number (``VERSION``: no sign, no leading zero). Anything
else in a model's directory that holds a manifest (``4.disabled``, ``2.bak``), and a symbolic
link named like a version, is not a version: it never serves, never outranks a number, and is
named, with why, in the model's ``notes`` (ListModels shows them). Other directories and files
(plots, progress.csv beside a manifest) are ignored, except a directory holding a bundle under a
name that cannot be a model's (MODEL_NAME: unicode, a space, a leading dot or dash, 65+
characters) and a symbolic link to a directory in place of a model: each is listed as refused,
with why. Links are never followed below the repository's own directory (``--models DIR`` is the
operator's and may be one): a candidate is opened component by component with O_NOFOLLOW
(``Candidate.open``). ``l3p serve --bundle DIR`` is a repository of one model, named after DIR.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from l3p.core.bundle_format import (
    DEFAULT_MAX_FILE_BYTES,
    GRAPHS,
    MANIFEST,
    MODEL_NAME,
    BundleDir,
    BundleError,
    check_pin,
    escaped,
    read_manifest,
)
from l3p.core.signing import SIGNATURE, TrustedKeys
from l3p.serving.config import DEFAULT_LOAD_TIMEOUT_S

NAME_RULE = "1-64 of A-Z a-z 0-9 _ . -, the first a letter or digit"
VERSION = re.compile(r"0|[1-9][0-9]{0,17}")
VERSION_RULE = "a version is a directory named by a number without a leading zero, e.g. 5, never a link"


@dataclass(frozen=True)
class Candidate:
    """A version found in the repository: what a load would read, ``below`` the operator's
    directory ``base`` (each name a real directory, never a link). ``refusal``: why it cannot be
    served without reading it. ``notes``: entries of the model that are not versions, and why."""

    name: str
    version: str  # "" for DIR/NAME/manifest.json
    base: Path
    below: tuple[str, ...] = ()
    refusal: str = ""
    notes: str = ""

    @property
    def path(self) -> Path:
        return self.base.joinpath(*self.below)

    def label(self) -> str:
        return f"{self.name}/{self.version}" if self.version else self.name

    def open(self) -> BundleDir:
        """The version's directory, opened without following a link below ``base``."""
        return BundleDir.open(self.base, self.label(), self.below)


def _has(directory: str, name: str) -> bool:
    """``directory`` holds an entry ``name``, of whatever kind (a link is not followed)."""
    try:
        os.lstat(os.path.join(directory, name))
    except (OSError, ValueError):
        return False
    return True


def _holds_bundle(entry: os.DirEntry) -> bool:
    return entry.is_dir(follow_symlinks=False) and _has(entry.path, MANIFEST)


def _entries(directory: str | Path) -> list[os.DirEntry]:
    with os.scandir(directory) as entries:
        return sorted(entries, key=lambda entry: entry.name)


def _entries_within(directory: str) -> list[os.DirEntry]:
    try:
        return _entries(directory)
    except (OSError, ValueError):  # gone or unreadable since it was listed: nothing to tell
        return []


def _versions(model: str, directory: str) -> tuple[list[str], str]:
    """A model directory's versions, and one line naming what holds a bundle (or is a link named
    like a version) but is not a version."""
    versions, odd = [], []
    for entry in _entries_within(directory):
        if entry.is_symlink():
            if VERSION.fullmatch(entry.name):
                odd.append(f"{model}/{escaped(entry.name)} (a symbolic link)")
        elif _holds_bundle(entry):
            if VERSION.fullmatch(entry.name):
                versions.append(entry.name)
            else:
                odd.append(f"{model}/{escaped(entry.name)}")
    if not odd:
        return versions, ""
    verb = "is not a version" if len(odd) == 1 else "are not versions"
    return versions, f"{', '.join(odd)} {verb} ({VERSION_RULE}): never served"


def scan(root: Path) -> dict[str, Candidate]:
    """The newest version of every model under root (see the module doc), and a refused
    candidate for each directory or link that holds a bundle but cannot be served. OSError if
    ``root`` cannot be listed."""
    root = Path(root)
    found: dict[str, Candidate] = {}
    for child in _entries(root):
        name = escaped(child.name)
        if child.is_symlink():
            # A stat through the link only to tell a model's place from a stray file link.
            if MODEL_NAME.fullmatch(child.name) and os.path.isdir(child.path):
                found[name] = Candidate(name, "", root, (child.name,), refusal=(
                    f"{name} is a symbolic link, which is never followed; copy the model's directory in "
                    "to serve it"))
            continue
        if not child.is_dir(follow_symlinks=False):
            continue
        if not MODEL_NAME.fullmatch(child.name):
            if _holds_bundle(child) or any(_holds_bundle(d) for d in _entries_within(child.path)):
                found[name] = Candidate(name, "", root, (child.name,), refusal=(
                    f"directory '{name}' holds a bundle but is not a model name ({NAME_RULE}); "
                    "rename it to serve it"))
            continue
        if _has(child.path, MANIFEST):
            found[name] = Candidate(name, "", root, (child.name,))
            continue
        versions, notes = _versions(name, child.path)
        if versions:
            newest = max(versions, key=int)
            found[name] = Candidate(name, newest, root, (child.name, newest), notes=notes)
        elif notes:
            found[name] = Candidate(name, "", root, (child.name,), refusal=f"no version of {name} can serve: {notes}")
    return found


def _stat(bundle: BundleDir, name: str) -> tuple:
    info = bundle.stat(name)
    if info is None:
        return (name,)
    return (name, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def identity(candidate: Candidate) -> tuple[str, tuple]:
    """Blocking: a candidate's manifest digest (or why it cannot be read), and what its files are
    now: the entry of its manifest, its signature and every graph file its manifest names (absent
    ones too; links as links). Stats only: no graph is read."""
    try:
        with candidate.open() as bundle:
            try:
                manifest = read_manifest(bundle)
                digest = check_pin(bundle.path, manifest, None, shown=bundle.where)
                names = [MANIFEST, SIGNATURE, *(manifest["files"][graph]["path"] for graph in GRAPHS)]
            except BundleError as exc:  # a manifest being written, or broken: its digest is its text
                digest, names = f"unreadable: {exc}", [MANIFEST, SIGNATURE]
            return digest, tuple(_stat(bundle, name) for name in names)
    except BundleError as exc:  # the directory itself went away or became a link
        return f"unreadable: {exc}", ()


def check_models(found: dict[str, Candidate], pins: dict[str, frozenset[str]],
                 default: str | None) -> str:
    """The default model of a repository holding ``found``; BundleError if it holds none that
    can be served, or the pins or the default name a model it does not hold."""
    servable = [name for name, candidate in found.items() if not candidate.refusal]
    if not servable:
        refused = "; ".join(candidate.refusal for candidate in found.values())
        raise BundleError("no model bundle found (a model is DIR/NAME/manifest.json or "
                          "DIR/NAME/VERSION/manifest.json)" + (f": {refused}" if refused else ""))
    unpinned = sorted(set(pins) - set(servable))
    if unpinned:
        raise BundleError(f"--model-sha256 names {', '.join(unpinned)}, which the repository "
                          f"does not hold (models: {', '.join(servable)})")
    if default is not None and default not in servable:
        raise BundleError(f"--default-model {default}: no such model (models: {', '.join(servable)})")
    return default or servable[0]


@dataclass(frozen=True)
class ModelSpec:
    """What a server serves and how it checks it: a models directory (``--models``) or one bundle
    (``--bundle``), the digests each model may have, the default model, the keys one of which must
    have signed every version (None: no signature needed), where the highest sequence served per
    model is kept (None: serving/sequences.py's default file), the size cap per graph file, and how
    long a load may take before it is reported as jammed."""

    root: Path | None = None
    bundle: Path | None = None
    pins: dict[str, frozenset[str]] = field(default_factory=dict)
    default: str | None = None
    trusted: TrustedKeys | None = None
    sequences: Path | None = None
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S

    @property
    def pin_option(self) -> str:
        return "--bundle-sha256" if self.bundle is not None else "--model-sha256"

    @staticmethod
    def bundle_name(path: Path) -> str:
        """The model name of a --bundle directory: its name, made safe."""
        name = re.sub(r"[^A-Za-z0-9_.-]", "-", Path(path).resolve().name).lstrip("._-")[:64]
        return name or "model"

    def sources(self) -> dict[str, Candidate]:
        if self.bundle is not None:
            name = self.bundle_name(self.bundle)
            return {name: Candidate(name, "", Path(self.bundle))}
        try:
            is_directory = stat.S_ISDIR(os.stat(self.root).st_mode)
        except (OSError, TypeError, ValueError):
            is_directory = False
        if not is_directory:
            raise BundleError(f"models directory {self.root}: not a directory")
        return scan(self.root)
