"""The model repository: every bundle under a directory, served by name, new versions swapped in
under live episodes.

    DIR/NAME/manifest.json              a model NAME (one version, named "")
    DIR/NAME/VERSION/manifest.json      a model NAME in versions; the newest VERSION serves
                                        (numeric versions by number, others by name)

Other directories and files (plots, progress.csv beside a manifest) are ignored, except a
directory holding a bundle under a name that cannot be a model's (MODEL_NAME: unicode, a space,
a leading dot or dash, 65+ characters): it is logged once and listed by ListModels as refused,
with why. ``l3p serve --bundle DIR`` is a repository of one model, named after DIR.

A swap: the watch (every --poll-interval seconds) or an authorized ReloadModels finds a version
(another directory, or the same one with another manifest digest), checks it against the model's
pinned digests and, with --trusted-keys, its signature, before any graph is opened, loads it off
the event loop, and makes it current. New episodes get it; running ones keep the version they
started on (their session holds it), and an old version is unloaded when its last episode ends.
A version that fails to load or verify leaves the current one serving; the reason is logged (with
the full path) and reported by ListModels (relative to the repository: model, version, file), and
the same candidate is tried again once anything it consists of changes: its manifest, signature
or a graph file the manifest names (their size, mtime, ctime or inode), so a copy that lands the
manifest first is loaded once the rest has landed.

Loading never blocks the server: only regular files are read (a FIFO, device or socket is
refused, never opened for a blocking read), each at most --max-file-bytes, and every look at the
repository and every load runs in a daemon thread of its own that the server waits on for at
most --load-timeout seconds: one that takes longer is reported as jammed and abandoned (its
result, should it come, is dropped), and can hold up neither later loads nor shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from l3p.core.bundle_format import (
    DEFAULT_MAX_FILE_BYTES,
    GRAPHS,
    MANIFEST,
    BundleError,
    check_pin,
    read_manifest,
)
from l3p.core.errors import L3PError
from l3p.core.signing import SIGNATURE, TrustedKeys, verify_bundle
from l3p.protos import l3p_planner_pb2 as pb
from l3p.serving.bundle import Bundle, load_bundle
from l3p.serving.config import DEFAULT_LOAD_TIMEOUT_S, MODEL_NAME
from l3p.serving.engine import Engine
from l3p.serving.errors import UnknownModelError
from l3p.serving.logs import event
from l3p.serving.mapping import model_info
from l3p.serving.metrics import Metrics

NAME_RULE = "1-64 of A-Z a-z 0-9 _ . -, the first a letter or digit"


@dataclass(frozen=True)
class Candidate:
    """A version found in the repository: what a load would read. ``refusal``: why it cannot be
    served without reading it (a directory name that cannot be a model's)."""

    name: str
    version: str  # "" for DIR/NAME/manifest.json
    path: Path
    refusal: str = ""

    def label(self) -> str:
        return f"{self.name}/{self.version}" if self.version else self.name


def _version_key(path: Path) -> tuple:
    return (0, int(path.name), "") if path.name.isdigit() else (1, 0, path.name)


def shown_name(name: str) -> str:
    """A directory name as logs and ListModels can carry it: non-ASCII (and undecodable bytes)
    escaped."""
    return ascii(name)[1:-1]


def _is_bundle(directory: Path) -> bool:
    return directory.is_dir() and (directory / MANIFEST).is_file()


def scan(root: Path) -> dict[str, Candidate]:
    """The newest version of every model under root (see the module doc), and a refused
    candidate for each directory that holds a bundle under a name that cannot be a model's."""
    found: dict[str, Candidate] = {}
    for child in sorted(Path(root).iterdir()):
        if not child.is_dir():
            continue
        if not MODEL_NAME.fullmatch(child.name):
            try:
                holds = _is_bundle(child) or any(_is_bundle(d) for d in child.iterdir())
            except OSError:  # unreadable: nothing to tell about it
                holds = False
            if holds:
                name = shown_name(child.name)
                found[name] = Candidate(name, "", child, refusal=(
                    f"directory '{name}' holds a bundle but is not a model name ({NAME_RULE}); "
                    "rename it to serve it"))
            continue
        if (child / MANIFEST).is_file():
            found[child.name] = Candidate(child.name, "", child)
            continue
        versions, odd = [], []
        for d in child.iterdir():
            if _is_bundle(d):
                (versions if MODEL_NAME.fullmatch(d.name) else odd).append(d)
        if versions:
            newest = max(versions, key=_version_key)
            found[child.name] = Candidate(child.name, newest.name, newest)
        elif odd:
            names = ", ".join(sorted(f"'{shown_name(d.name)}'" for d in odd))
            found[child.name] = Candidate(child.name, "", child, refusal=(
                f"no version directory of {child.name} has a usable name ({names}: a version "
                f"is {NAME_RULE}); rename one to serve it"))
    return found


def _stat(path: Path, name: str) -> tuple:
    try:
        info = os.stat(path / name)
    except (OSError, ValueError):  # absent, unreadable, or a name no file can have
        return (name,)
    return (name, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def identity(path: Path) -> tuple[str, tuple]:
    """Blocking: a candidate's manifest digest (or why it cannot be read), and what its files are
    now: the stat of its manifest, its signature and every graph file its manifest names (absent
    ones too). Stats only: no graph is read."""
    try:
        manifest = read_manifest(path)
        digest = check_pin(path, manifest, None)
        names = [MANIFEST, SIGNATURE, *(manifest["files"][graph]["path"] for graph in GRAPHS)]
    except BundleError as exc:  # a manifest being written, or broken: its digest is its text
        digest, names = f"unreadable: {exc}", [MANIFEST, SIGNATURE]
    return digest, tuple(_stat(path, name) for name in names)


class LoadJammedError(L3PError):
    """A look at the repository or a load took longer than the load timeout; it was abandoned."""


async def run_bounded(work: Callable[[], object], timeout_s: float, what: str,
                      on_late: Callable[[object], None] = lambda result: None):
    """``work()`` run in a daemon thread of its own, waited on for at most ``timeout_s``
    (LoadJammedError past it, naming ``what``). A thread stuck in a read holds up neither the
    event loop, nor later calls, nor the process's exit; a result that comes after its caller
    stopped waiting (timeout, cancellation) is handed to ``on_late`` to dispose of."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()
    lock = threading.Lock()
    state = {"abandoned": False, "handed": False}

    def settle(result, error) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        result = error = None
        try:
            result = work()
        except BaseException as exc:  # noqa: BLE001 (handed to the waiter, which sorts it)
            error = exc
        with lock:
            if not state["abandoned"]:
                try:
                    loop.call_soon_threadsafe(settle, result, error)
                    state["handed"] = True
                except RuntimeError:  # the loop is closed: the server is gone
                    pass
        if not state["handed"] and result is not None:
            on_late(result)

    threading.Thread(target=run, name="l3p-load", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(future), timeout_s)
    except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
        with lock:
            state["abandoned"] = True
            handed = state["handed"]
        if handed and isinstance(exc, asyncio.TimeoutError):
            return await future  # it finished as the wait ran out: settled on the next loop turn
        if handed:  # cancelled with the result on its way: dispose of it when it lands
            future.add_done_callback(
                lambda f: on_late(f.result()) if not f.cancelled() and f.exception() is None else None)
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise LoadJammedError(f"{what} took longer than {timeout_s:g} s (--load-timeout) and was "
                              "abandoned: a file that is slow to read?") from None


def _resident_bytes() -> int:
    """This process's resident memory (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(eq=False)
class ModelVersion:
    """One loaded version: its bundle, its own engine (graph cache, batchers, threads), the
    episodes running on it."""

    name: str
    version: str
    digest: str  # the manifest digest: a changed bundle in the same directory is a new version
    bundle: Bundle
    engine: Engine
    info: pb.ModelInfo
    memory_bytes: int
    sessions: int = 0
    retired: bool = False  # no longer current: unloaded when its last episode ends

    def label(self) -> str:
        return f"{self.name}/{self.version}" if self.version else self.name


@dataclass(frozen=True)
class _Refusal:
    """A candidate that was refused, what it consisted of then (``identity``), and why."""

    path: Path
    identity: tuple
    version: str
    error: str


@dataclass
class _Model:
    current: ModelVersion
    draining: list[ModelVersion] = field(default_factory=list)
    last_error: str = ""


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
    have signed every version (None: no signature needed), the size cap per graph file, and how
    long a load may take before it is reported as jammed."""

    root: Path | None = None
    bundle: Path | None = None
    pins: dict[str, frozenset[str]] = field(default_factory=dict)
    default: str | None = None
    trusted: TrustedKeys | None = None
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
        if self.root is None or not self.root.is_dir():
            raise BundleError(f"models directory {self.root}: not a directory")
        return scan(self.root)


def _close_late(version: ModelVersion) -> None:
    """A version whose load finished after the server stopped waiting for it: never served."""
    version.engine.close()


class Repository:
    """The served models by name. ``sources()`` lists the candidates (``scan`` of the models
    directory, or the one --bundle); ``pins`` maps a model to the digests it may have (absent: any);
    ``trusted``: the keys one of which must have signed a version (None: none needed);
    ``make_engine(bundle, name)`` builds a version's engine; ``poll_interval_s`` (None: no watch)
    only says, in a refusal, when it is tried again. Use from the server's event loop, except
    ``load_all``, which runs before it serves."""

    def __init__(self, sources: Callable[[], dict[str, Candidate]], pins: dict[str, frozenset[str]],
                 make_engine: Callable[[Bundle, str], Engine], default: str | None = None,
                 on_change: Callable[[ModelVersion, str], None] = lambda version, what: None,
                 metrics: Metrics | None = None, pin_option: str = "--model-sha256", *,
                 trusted: TrustedKeys | None = None, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S, poll_interval_s: float | None = None):
        self._sources = sources
        self._pins = pins
        self._trusted = trusted
        self._max_file_bytes = max_file_bytes
        self._load_timeout_s = load_timeout_s
        self._make_engine = make_engine
        self._on_change = on_change  # (version, "loaded" | "unloaded")
        self._metrics = metrics
        self._pin_option = pin_option  # where pins come from, for messages
        self._retry = ("tried again once a file of it changes: "
                       + (f"the watch looks every {poll_interval_s:g} s" if poll_interval_s
                          else "at the next ReloadModels after that"))
        self._requested_default = default
        self.default = ""
        self.models: dict[str, _Model] = {}
        # Per model, the candidate refused: not tried again while it consists of the same files;
        # for a model none of whose versions serves, ListModels and calls naming it say why.
        self._refused: dict[str, _Refusal] = {}
        self._refresh_lock = asyncio.Lock()

    @classmethod
    def of_bundle(cls, bundle: Bundle, make_engine: Callable[[Bundle, str], Engine],
                  on_change: Callable[[ModelVersion, str], None] = lambda version, what: None,
                  metrics: Metrics | None = None) -> Repository:
        """A repository of one bundle already loaded, never swapped (for embedding the server)."""
        repository = cls(dict, {}, make_engine, on_change=on_change, metrics=metrics)
        name = ModelSpec.bundle_name(bundle.path)
        info = model_info(bundle)
        info.model = name
        repository._install(
            ModelVersion(name, "", bundle.sha256, bundle, make_engine(bundle, name), info, 0))
        repository.default = name
        return repository

    # -- loading

    def load_all(self) -> None:
        """Loads every model found (at startup): BundleError names the first that fails. A
        directory refused for its name is logged and listed, and the others are served."""
        found = self._sources()
        self.default = check_models(found, self._pins, self._requested_default)
        for candidate in found.values():
            if candidate.refusal:
                self._refuse(candidate, ("skipped", candidate.refusal), candidate.refusal)
            else:
                self._install(self._load(candidate))

    def _load(self, candidate: Candidate) -> ModelVersion:
        """Blocking: verify (digest pin and signature, from the manifest and signature alone),
        load, build the engine."""
        where = candidate.label()
        manifest = read_manifest(candidate.path, where)
        digest = check_pin(candidate.path, manifest, None, shown=where)
        allowed = self._pins.get(candidate.name)
        if allowed is not None and digest not in allowed:
            raise BundleError(f"bundle {where} has digest {digest}, not the pinned "
                              f"{self._pin_option} {' or '.join(sorted(allowed))}; refusing to "
                              "serve it")
        signer = None if self._trusted is None else verify_bundle(candidate.path, digest, self._trusted, where)
        before = _resident_bytes()
        # Pinned to the digest just checked: a manifest changed since then is refused.
        bundle = load_bundle(candidate.path, digest, pin_source=f"digest of {where}", shown=where,
                             max_file_bytes=self._max_file_bytes)
        engine = self._make_engine(bundle, candidate.name)
        memory = max(0, _resident_bytes() - before)
        info = model_info(bundle)
        info.model, info.version, info.memory_bytes = candidate.name, candidate.version, memory
        info.signed_by = "" if signer is None else signer.describe()
        return ModelVersion(candidate.name, candidate.version, digest, bundle, engine, info, memory)

    async def refresh(self) -> list[pb.ModelLoad]:
        """Loads every new version found; one ModelLoad per attempt (an empty list: nothing
        new). A failure leaves the current version serving."""
        async with self._refresh_lock:
            loads = []
            try:
                found, settled = await run_bounded(self._changed, self._load_timeout_s,
                                                   "looking at the repository")
            except (OSError, L3PError) as exc:  # the directory went away, became unreadable, jammed
                event(logging.WARNING, "repository_unreadable", error=str(exc))
                return []
            for name in settled:  # what was refused is gone: nothing left to report
                self._refused.pop(name, None)
                if name in self.models:
                    self.models[name].last_error = ""
            for candidate, files in found:
                if candidate.refusal:
                    self._refuse(candidate, files, candidate.refusal)
                    loads.append(pb.ModelLoad(model=candidate.name, version=candidate.version,
                                              loaded=False, error=candidate.refusal))
                    continue
                try:
                    version = await run_bounded(lambda c=candidate: self._load(c), self._load_timeout_s,
                                                f"loading {candidate.label()}", on_late=_close_late)
                except Exception as exc:  # noqa: BLE001 (whatever a bad bundle raises, the current serves)
                    message = self._refuse(candidate, files, self._reason(candidate, exc), exc)
                    loads.append(pb.ModelLoad(model=candidate.name, version=candidate.version,
                                              loaded=False, error=message))
                    continue
                self._install(version)
                loads.append(pb.ModelLoad(model=version.name, version=version.version, loaded=True))
            return loads

    @staticmethod
    def _reason(candidate: Candidate, exc: Exception) -> str:
        """Why a load failed, as clients may read it: the model, version and file relative to
        the repository, never a server path (the log has those)."""
        label = candidate.label()
        if isinstance(exc, L3PError):
            text = str(exc)
        elif isinstance(exc, OSError):
            text = f"cannot read it ({exc.strerror or type(exc).__name__})"
        else:
            text = f"failed to load ({type(exc).__name__}; see the server log)"
        for path in {str(candidate.path), str(candidate.path.resolve())}:
            text = text.replace(path, label)
        return text if label in text else f"{label}: {text}"

    def _refuse(self, candidate: Candidate, files: tuple, message: str,
                exc: Exception | None = None) -> str:
        """Records a refused candidate (not tried again while ``files`` are the same), logs it
        once; the error as ListModels reports it."""
        error = message if candidate.refusal else f"{message}; {self._retry}"
        model = self.models.get(candidate.name)
        if self._metrics is not None:
            self._metrics.model_loads.labels(candidate.name, "failed").inc()
        self._refused[candidate.name] = _Refusal(candidate.path, files, candidate.version, error)
        if model is not None:
            model.last_error = error
        event(logging.ERROR, "model_skipped" if candidate.refusal else "model_load_failed",
              model=candidate.name, version=candidate.version, error=message,
              bundle=str(candidate.path), detail=None if exc is None or isinstance(exc, L3PError) else repr(exc),
              serving=model.current.label() if model is not None else None)
        return error

    def _changed(self) -> tuple[list[tuple[Candidate, tuple]], list[str]]:
        """Blocking: the candidates that differ from what serves (or was refused) with what their
        files are now; and the models whose refusal is moot (their newest candidate serves, or
        the model, never served, left the directory). A model that left the directory keeps
        serving; a new name is loaded."""
        changed, settled = [], []
        sources = self._sources()
        for name, candidate in sources.items():
            if candidate.refusal:
                digest, files = "", ("skipped", candidate.refusal)
            else:
                digest, files = identity(candidate.path)
            model = self.models.get(name)
            if model is not None and not candidate.refusal:
                current = model.current
                if (current.version, current.digest) == (candidate.version, digest):
                    if name in self._refused:
                        settled.append(name)
                    continue
            refused = self._refused.get(name)
            if refused is not None and (refused.path, refused.identity) == (candidate.path, files):
                continue
            changed.append((candidate, files))
        settled += [name for name in list(self._refused) if name not in sources and name not in self.models]
        return changed, settled

    def _install(self, version: ModelVersion) -> None:
        self._refused.pop(version.name, None)
        model = self.models.get(version.name)
        if model is None:
            self.models[version.name] = _Model(version)
        if self._metrics is not None:
            self._metrics.model_loads.labels(version.name, "ok").inc()
            self._metrics.model_memory.labels(version.name, version.version).set(version.memory_bytes)
        event(logging.INFO, "model_loaded", model=version.name, version=version.version,
              bundle=str(version.bundle.path), bundle_sha256=version.digest,
              signed_by=version.info.signed_by or None, memory_bytes=version.memory_bytes,
              replaces=None if model is None else model.current.version)
        self._on_change(version, "loaded")
        if model is not None:
            old = model.current
            model.current, model.last_error = version, ""
            old.retired = True
            if old.sessions:
                model.draining.append(old)
            else:
                self._unload(old)

    def _unload(self, version: ModelVersion) -> None:
        version.engine.close()
        model = self.models.get(version.name)
        if model is not None and version in model.draining:
            model.draining.remove(version)
        if self._metrics is not None:
            self._metrics.model_memory.remove(version.name, version.version)
        event(logging.INFO, "model_unloaded", model=version.name, version=version.version)
        self._on_change(version, "unloaded")

    # -- requests

    def get(self, name: str) -> ModelVersion:
        """The current version of model ``name`` ("" the default); UnknownModelError if none."""
        model = self.models.get(name or self.default)
        if model is None and name in self._refused:
            raise UnknownModelError(f"model {name!r} is not served: it failed to load "
                                    f"({self._refused[name].error})")
        if model is None:
            raise UnknownModelError(
                f"model {name[:64]!r} is not served here; models: {', '.join(self.models)} "
                "(ListModels; an empty name is the default, " f"{self.default})")
        return model.current

    @staticmethod
    def hold(version: ModelVersion) -> None:
        """One more episode runs on ``version`` (until ``release``): it stays loaded."""
        version.sessions += 1

    def release(self, version: ModelVersion) -> None:
        version.sessions -= 1
        if version.retired and version.sessions == 0:
            self._unload(version)

    def statuses(self) -> pb.ListModelsResponse:
        return pb.ListModelsResponse(default_model=self.default, models=[
            pb.ModelStatus(info=m.current.info,
                           live_sessions=m.current.sessions + sum(v.sessions for v in m.draining),
                           draining_versions=[v.version for v in m.draining],
                           last_error=m.last_error, loaded=True)
            for m in self.models.values()
        ] + [
            pb.ModelStatus(info=pb.ModelInfo(model=name, version=refused.version), last_error=refused.error)
            for name, refused in self._refused.items() if name not in self.models
        ])

    def versions(self) -> list[ModelVersion]:
        """Every loaded version, current and draining."""
        return [v for m in self.models.values() for v in (m.current, *m.draining)]

    def close(self) -> None:
        for version in self.versions():
            version.engine.close()
