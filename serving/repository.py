"""The model repository: every bundle under a directory, served by name, new versions swapped in
under live episodes. Its layout, and what is refused before anything is read, are
serving/candidates.py's.

A swap: the watch (every --poll-interval seconds) or an authorized ReloadModels finds a version
(another directory, or the same one with another manifest digest), checks it against the model's
pinned digests and, with --trusted-keys, its signature (a trusted key, for this model, with a
sequence no lower than the highest served for it: serving/sequences.py), before any graph is
opened, loads it off the event loop, and makes it current. New episodes get it; running ones keep
the version they started on (their session holds it), and an old version is unloaded when its
last episode ends. A version that fails to load or verify leaves the current one serving; the
reason is logged (with the full path) and reported by ListModels (relative to the repository:
model, version, file, every character from a file escaped), and the same candidate is tried
again once anything it consists of changes: its manifest, signature or a graph file the manifest
names (their size, mtime, ctime or inode), or its model's served sequence (``l3p rollback``), so
a copy that lands the manifest first is loaded once the rest has landed.

Loading never blocks the server: every file is opened through the version's directory without
following a link, only regular files are read (a FIFO, device or socket is refused, never opened
for a blocking read), each at most --max-file-bytes, and every look at the repository and every
load runs in a daemon thread of its own that the server waits on for at most --load-timeout
seconds: one that takes longer is reported as jammed and abandoned (its result, should it come,
is dropped), and can hold up neither later loads nor shutdown.

With ``--processes N`` each process has its repository; a ReloadModels that one answers counts in
a counter the parent shares with all (``reloads``), and every other process looks again before it
next answers GetModelInfo, ListModels or StartEpisode (``catch_up``), so after ReloadModels no
connection sees the old version.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

from l3p.core.bundle_format import DEFAULT_MAX_FILE_BYTES, BundleError, check_pin, printable, read_manifest
from l3p.core.errors import L3PError
from l3p.core.signing import Signature, TrustedKeys, verify_bundle
from l3p.protos import l3p_planner_pb2 as pb
from l3p.serving.bounded import run_bounded
from l3p.serving.bundle import Bundle, load_bundle
# ModelSpec, check_models and scan are imported from here by the server, its start-up and tests.
from l3p.serving.candidates import Candidate, ModelSpec, check_models, identity, scan
from l3p.serving.config import DEFAULT_LOAD_TIMEOUT_S
from l3p.serving.engine import Engine
from l3p.serving.errors import UnknownModelError
from l3p.serving.logs import event
from l3p.serving.mapping import model_info
from l3p.serving.metrics import Metrics
from l3p.serving.sequences import Mark, ServedSequences, check_sequence

__all__ = ["ModelSpec", "ModelVersion", "Repository", "check_models", "scan"]


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
    signature: Signature | None = None  # with --trusted-keys: who signed it, for which model, when
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


def _detail(exc: Exception | None, message: str) -> str | None:
    """What the log adds to a refusal's message: an unexpected error's repr, or the full text of an
    expected one whose server paths the message left out."""
    if exc is None:
        return None
    if not isinstance(exc, L3PError):
        return repr(exc)
    return None if str(exc) in message else str(exc)


def _close_late(version: ModelVersion) -> None:
    """A version whose load finished after the server stopped waiting for it: never served."""
    version.engine.close()


class Repository:
    """The served models by name. ``sources()`` lists the candidates (``scan`` of the models
    directory, or the one --bundle); ``pins`` maps a model to the digests it may have (absent: any);
    ``trusted``: the keys one of which must have signed a version for its model, with a sequence no
    lower than the highest served for it (None: none needed; ``sequences``: where those are kept,
    default serving/sequences.py's file); ``make_engine(bundle, name)`` builds a version's engine;
    ``poll_interval_s`` (None: no watch) only says, in a refusal, when it is tried again;
    ``reloads``: the ReloadModels counter the processes of one server share. Use from the server's
    event loop."""

    def __init__(self, sources: Callable[[], dict[str, Candidate]], pins: dict[str, frozenset[str]],
                 make_engine: Callable[[Bundle, str], Engine], default: str | None = None,
                 on_change: Callable[[ModelVersion, str], None] = lambda version, what: None,
                 metrics: Metrics | None = None, pin_option: str = "--model-sha256", *,
                 trusted: TrustedKeys | None = None, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
                 load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S, poll_interval_s: float | None = None,
                 sequences: ServedSequences | None = None, reloads: Synchronized | None = None):
        self._sources = sources
        self._pins = pins
        self._trusted = trusted
        self._sequences = None if trusted is None else sequences or ServedSequences()
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
        # Per model, what in its directory holds a bundle but is not a version (scan's notes).
        self._notes: dict[str, str] = {}
        self._refresh_lock = asyncio.Lock()
        self._reloads = reloads
        self._reloads_seen = 0  # the count when this process last looked

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

    async def load_all(self) -> None:
        """Loads every model found (at start, before the server serves): BundleError names the first
        that fails, LoadJammedError one that outlasts --load-timeout. A directory refused for its
        name is logged and listed, and the others are served. The look and each load run off the
        event loop, as a swap's do; each version is installed on it."""
        found = await run_bounded(self._sources, self._load_timeout_s, "looking at the repository")
        self.default = check_models(found, self._pins, self._requested_default)
        self._note({name: candidate.notes for name, candidate in found.items()})
        for candidate in found.values():
            if candidate.refusal:
                self._refuse(candidate, ("skipped", candidate.refusal), candidate.refusal)
            else:
                self._install(await run_bounded(lambda c=candidate: self._load(c), self._load_timeout_s,
                                                f"loading {candidate.label()}", on_late=_close_late))

    def _load(self, candidate: Candidate) -> ModelVersion:
        """Blocking: verify (digest pin, signature and its sequence, from the manifest and
        signature alone), load, build the engine; with a signature, record its sequence as the
        model's highest served. Every file is read through the version's directory as opened."""
        where = candidate.label()
        with candidate.open() as directory:
            manifest = read_manifest(directory)
            digest = check_pin(directory.path, manifest, None, shown=where)
            allowed = self._pins.get(candidate.name)
            if allowed is not None and digest not in allowed:
                raise BundleError(f"bundle {where} has digest {digest}, not the pinned "
                                  f"{self._pin_option} {' or '.join(sorted(allowed))}; refusing to "
                                  "serve it")
            signature = None
            if self._trusted is not None:
                signature = verify_bundle(directory, digest, self._trusted, model=candidate.name)
                check_sequence(candidate, signature, self._sequences)
            before = _resident_bytes()
            # Pinned to the digest just checked: a manifest changed since then is refused.
            bundle = load_bundle(directory, digest, pin_source=f"digest of {where}",
                                 max_file_bytes=self._max_file_bytes)
        engine = self._make_engine(bundle, candidate.name)
        memory = max(0, _resident_bytes() - before)
        if signature is not None:
            try:
                self._sequences.record(candidate.base, candidate.name,
                                       Mark(signature.sequence, candidate.version, digest))
            except BundleError:
                engine.close()
                raise
        info = model_info(bundle)
        info.model, info.version, info.memory_bytes = candidate.name, candidate.version, memory
        info.signed_by = "" if signature is None else signature.key.describe()
        return ModelVersion(candidate.name, candidate.version, digest, bundle, engine, info, memory,
                            signature=signature)

    async def reload(self) -> list[pb.ModelLoad]:
        """ReloadModels: ``refresh`` here, and in the server's other processes before their next
        call that reads the models (``catch_up``)."""
        if self._reloads is not None:
            with self._reloads.get_lock():
                self._reloads.value += 1
        return await self.refresh()

    async def catch_up(self) -> None:
        """``refresh`` if another process of this server answered a ReloadModels since this one
        last looked."""
        if self._reloads is not None and self._reloads.value != self._reloads_seen:
            await self.refresh()

    async def refresh(self) -> list[pb.ModelLoad]:
        """Loads every new version found; one ModelLoad per attempt (an empty list: nothing
        new). A failure leaves the current version serving."""
        async with self._refresh_lock:
            if self._reloads is not None:  # read before the look: a reload asked during it looks again
                self._reloads_seen = self._reloads.value
            loads = []
            try:
                found, settled, notes = await run_bounded(self._changed, self._load_timeout_s,
                                                          "looking at the repository")
            except (OSError, L3PError) as exc:  # the directory went away, became unreadable, jammed
                event(logging.WARNING, "repository_unreadable", error=str(exc))
                return []
            except Exception as exc:  # noqa: BLE001 (a bug: logged; ReloadModels still answers, the current serves)
                event(logging.ERROR, "repository_look_failed", exc, error=repr(exc))
                return []
            self._note(notes)
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

    def _reason(self, candidate: Candidate, exc: Exception) -> str:
        """Why a load failed, as clients may read it: the model, version and file relative to
        the repository, never a server path (the log has those), on one line."""
        label = candidate.label()
        if isinstance(exc, L3PError):
            text = str(exc)
        elif isinstance(exc, OSError):
            text = f"cannot read it ({exc.strerror or type(exc).__name__})"
        else:
            text = f"failed to load ({type(exc).__name__}; see the server log)"
        text = text.replace(str(candidate.path), label)
        if self._sequences is not None:
            text = text.replace(f"served-sequences file {self._sequences.path}",
                                "the served-sequences file (the server log names it)")
        return printable(text if label in text else f"{label}: {text}")

    def _note(self, notes: dict[str, str]) -> None:
        """Keeps (and logs once) each model's entries that are not versions."""
        notes = {name: note for name, note in notes.items() if note}
        for name, note in notes.items():
            if self._notes.get(name) != note:
                event(logging.WARNING, "not_versions", model=name, note=note)
        self._notes = notes

    def _refuse(self, candidate: Candidate, files: tuple, message: str,
                exc: Exception | None = None) -> str:
        """Records a refused candidate (not tried again while ``files`` are the same), logs it
        once; the error as ListModels reports it."""
        error = printable(message if candidate.refusal else f"{message}; {self._retry}")
        model = self.models.get(candidate.name)
        if self._metrics is not None:
            self._metrics.model_loads.labels(candidate.name, "failed").inc()
        self._refused[candidate.name] = _Refusal(candidate.path, files, candidate.version, error)
        if model is not None:
            model.last_error = error
        event(logging.ERROR, "model_skipped" if candidate.refusal else "model_load_failed",
              model=candidate.name, version=candidate.version, error=message,
              bundle=str(candidate.path), detail=_detail(exc, message),
              serving=model.current.label() if model is not None else None)
        return error

    def _changed(self) -> tuple[list[tuple[Candidate, tuple]], list[str], dict[str, str]]:
        """Blocking: the candidates that differ from what serves (or was refused) with what they
        consist of now (their files and, with --trusted-keys, their model's served sequence); the
        models whose refusal is moot (their newest candidate serves, or the model, never served,
        left the directory); and each model's notes. A model that left the directory keeps
        serving; a new name is loaded."""
        changed, settled = [], []
        sources = self._sources()
        marks: dict[Path, dict[str, Mark]] = {}
        for name, candidate in sources.items():
            if candidate.refusal:
                digest, files = "", ("skipped", candidate.refusal)
            else:
                digest, files = identity(candidate)
                if self._sequences is not None:
                    if candidate.base not in marks:
                        marks[candidate.base] = self._sequences.marks(candidate.base)
                    mark = marks[candidate.base].get(name)
                    files += (("served sequence", None if mark is None else mark.sequence),)
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
        return changed, settled, {name: candidate.notes for name, candidate in sources.items()}

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
              signed_by=version.info.signed_by or None,
              signed_sequence=None if version.signature is None else version.signature.sequence,
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
        """Every model; ``last_error``: why its newest version was refused, then what in its
        directory is not a version (one line)."""

        def error(name: str, refusal: str) -> str:
            return "; ".join(part for part in (refusal, self._notes.get(name, "")) if part)

        return pb.ListModelsResponse(default_model=self.default, models=[
            pb.ModelStatus(info=m.current.info,
                           live_sessions=m.current.sessions + sum(v.sessions for v in m.draining),
                           draining_versions=[v.version for v in m.draining],
                           last_error=error(name, m.last_error), loaded=True)
            for name, m in self.models.items()
        ] + [
            pb.ModelStatus(info=pb.ModelInfo(model=name, version=refused.version),
                           last_error=error(name, refused.error))
            for name, refused in self._refused.items() if name not in self.models
        ])

    def versions(self) -> list[ModelVersion]:
        """Every loaded version, current and draining."""
        return [v for m in self.models.values() for v in (m.current, *m.draining)]

    def close(self) -> None:
        for version in self.versions():
            version.engine.close()
