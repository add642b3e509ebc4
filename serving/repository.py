"""The model repository: every bundle under a directory, served by name, new versions swapped in
under live episodes.

    DIR/NAME/manifest.json              a model NAME (one version, named "")
    DIR/NAME/VERSION/manifest.json      a model NAME in versions; the newest VERSION serves
                                        (numeric versions by number, others by name)

Other directories and files (plots, progress.csv beside a manifest) are ignored. ``l3p serve
--bundle DIR`` is a repository of one model, named after DIR.

A swap: the watch (every --poll-interval seconds) or an authorized ReloadModels finds a version
(another directory, or the same one with another manifest digest), checks it against the model's
pinned digests before any graph is opened, loads it off the event loop, and makes it current.
New episodes get it; running ones keep the version they started on (their session holds it), and
an old version is unloaded when its last episode ends. A version that fails to load or verify
leaves the current one serving; the reason is logged and reported by ListModels, and the same
candidate is not tried again until it changes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from l3p.core.bundle_format import MANIFEST, BundleError, check_pin, read_manifest
from l3p.core.errors import L3PError
from l3p.protos import l3p_planner_pb2 as pb
from l3p.serving.bundle import Bundle, load_bundle
from l3p.serving.engine import Engine
from l3p.serving.errors import UnknownModelError
from l3p.serving.logs import event
from l3p.serving.mapping import model_info
from l3p.serving.metrics import Metrics

# A model's name: a directory name that is safe in logs, metrics labels and health service names.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Candidate:
    """A version found in the repository: what a load would read."""

    name: str
    version: str  # "" for DIR/NAME/manifest.json
    path: Path

    def label(self) -> str:
        return f"{self.name}/{self.version}" if self.version else self.name


def _version_key(path: Path) -> tuple:
    return (0, int(path.name), "") if path.name.isdigit() else (1, 0, path.name)


def scan(root: Path) -> dict[str, Candidate]:
    """The newest version of every model under root (see the module doc)."""
    found: dict[str, Candidate] = {}
    for child in sorted(Path(root).iterdir()):
        if not child.is_dir() or not MODEL_NAME.fullmatch(child.name):
            continue
        if (child / MANIFEST).is_file():
            found[child.name] = Candidate(child.name, "", child)
            continue
        versions = [d for d in child.iterdir()
                    if d.is_dir() and MODEL_NAME.fullmatch(d.name) and (d / MANIFEST).is_file()]
        if versions:
            newest = max(versions, key=_version_key)
            found[child.name] = Candidate(child.name, newest.name, newest)
    return found


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
    """A candidate whose load failed, and why."""

    path: Path
    digest: str
    version: str
    error: str


@dataclass
class _Model:
    current: ModelVersion
    draining: list[ModelVersion] = field(default_factory=list)
    last_error: str = ""


def check_models(found: dict[str, Candidate], pins: dict[str, frozenset[str]],
                 default: str | None) -> str:
    """The default model of a repository holding ``found``; BundleError if it holds none, or the
    pins or the default name a model it does not hold."""
    if not found:
        raise BundleError("no model bundle found (a model is DIR/NAME/manifest.json or "
                          "DIR/NAME/VERSION/manifest.json)")
    unpinned = sorted(set(pins) - set(found))
    if unpinned:
        raise BundleError(f"--model-sha256 names {', '.join(unpinned)}, which the repository "
                          f"does not hold (models: {', '.join(found)})")
    if default is not None and default not in found:
        raise BundleError(f"--default-model {default}: no such model (models: {', '.join(found)})")
    return default or next(iter(found))


@dataclass(frozen=True)
class ModelSpec:
    """What a server serves: a models directory (``--models``) or one bundle (``--bundle``), the
    digests each model may have, and the default model."""

    root: Path | None = None
    bundle: Path | None = None
    pins: dict[str, frozenset[str]] = field(default_factory=dict)
    default: str | None = None

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


class Repository:
    """The served models by name. ``sources()`` lists the candidates (``scan`` of the models
    directory, or the one --bundle); ``pins`` maps a model to the digests it may have (absent: any);
    ``make_engine(bundle, name)`` builds a version's engine. Use from the server's event loop,
    except ``load_all``, which runs before it serves."""

    def __init__(self, sources: Callable[[], dict[str, Candidate]], pins: dict[str, frozenset[str]],
                 make_engine: Callable[[Bundle, str], Engine], default: str | None = None,
                 on_change: Callable[[ModelVersion, str], None] = lambda version, what: None,
                 metrics: Metrics | None = None, pin_option: str = "--model-sha256"):
        self._sources = sources
        self._pins = pins
        self._make_engine = make_engine
        self._on_change = on_change  # (version, "loaded" | "unloaded")
        self._metrics = metrics
        self._pin_option = pin_option  # where pins come from, for messages
        self._requested_default = default
        self.default = ""
        self.models: dict[str, _Model] = {}
        # Per model, the candidate whose load failed: not tried again unchanged; for a model
        # none of whose versions serves, ListModels and calls naming it say why.
        self._refused: dict[str, _Refusal] = {}
        self._refresh_lock = asyncio.Lock()
        self._loader = ThreadPoolExecutor(1, thread_name_prefix="l3p-load")

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
        """Loads every model found (at startup): BundleError names the first that fails."""
        found = self._sources()
        self.default = check_models(found, self._pins, self._requested_default)
        for candidate in found.values():
            self._install(self._load(candidate))

    def _load(self, candidate: Candidate) -> ModelVersion:
        """Blocking: verify (digest pin, from the manifest alone), load, build the engine."""
        where = candidate.label()
        manifest = read_manifest(candidate.path)
        digest = check_pin(candidate.path, manifest, None)
        allowed = self._pins.get(candidate.name)
        if allowed is not None and digest not in allowed:
            raise BundleError(f"bundle {candidate.path} has digest {digest}, not the pinned "
                              f"{self._pin_option} {' or '.join(sorted(allowed))}; refusing to "
                              "serve it")
        before = _resident_bytes()
        # Pinned to the digest just checked: a manifest changed since then is refused.
        bundle = load_bundle(candidate.path, digest, pin_source=f"digest of {where}")
        engine = self._make_engine(bundle, candidate.name)
        memory = max(0, _resident_bytes() - before)
        info = model_info(bundle)
        info.model, info.version, info.memory_bytes = candidate.name, candidate.version, memory
        return ModelVersion(candidate.name, candidate.version, digest, bundle, engine, info, memory)

    async def refresh(self) -> list[pb.ModelLoad]:
        """Loads every new version found; one ModelLoad per attempt (an empty list: nothing
        new). A failure leaves the current version serving."""
        async with self._refresh_lock:
            loads = []
            loop = asyncio.get_running_loop()
            try:
                found = await loop.run_in_executor(self._loader, self._changed)
            except (OSError, L3PError) as exc:  # the directory went away or became unreadable
                event(logging.WARNING, "repository_unreadable", error=str(exc))
                return []
            for candidate, digest in found:
                model = self.models.get(candidate.name)
                try:
                    version = await loop.run_in_executor(self._loader, self._load, candidate)
                except Exception as exc:  # noqa: BLE001 (whatever a bad bundle raises, the current serves)
                    message = str(exc) if isinstance(exc, (L3PError, OSError)) else repr(exc)
                    if self._metrics is not None:
                        self._metrics.model_loads.labels(candidate.name, "failed").inc()
                    self._refused[candidate.name] = _Refusal(candidate.path, digest, candidate.version, message)
                    if model is not None:
                        model.last_error = message
                    event(logging.ERROR, "model_load_failed", model=candidate.name,
                          version=candidate.version, error=message,
                          serving=model.current.label() if model is not None else None)
                    loads.append(pb.ModelLoad(model=candidate.name, version=candidate.version,
                                              loaded=False, error=message))
                    continue
                self._install(version)
                loads.append(pb.ModelLoad(model=version.name, version=version.version, loaded=True))
            return loads

    def _changed(self) -> list[tuple[Candidate, str]]:
        """Blocking: the candidates that differ from what serves (or failed) and their digests.
        A model that left the directory keeps serving; a new name is loaded."""
        changed = []
        for name, candidate in self._sources().items():
            try:
                digest = check_pin(candidate.path, read_manifest(candidate.path), None)
            except BundleError as exc:  # a manifest being written, or broken: its digest is its text
                digest = f"unreadable: {exc}"
            model = self.models.get(name)
            if model is not None:
                current = model.current
                if (current.version, current.digest) == (candidate.version, digest):
                    continue
            refused = self._refused.get(name)
            if refused is not None and (refused.path, refused.digest) == (candidate.path, digest):
                continue
            changed.append((candidate, digest))
        return changed

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
              memory_bytes=version.memory_bytes,
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
        self._loader.shutdown(wait=False, cancel_futures=True)
        for version in self.versions():
            version.engine.close()
