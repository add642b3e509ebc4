"""The highest signed sequence served per model: what makes a server refuse a rollback.

A signature carries a sequence, its signing time in milliseconds (core/signing.py). When a signed
version loads, its sequence is recorded here; from then on a version of that model signed with a
lower sequence is refused, across restarts, until an operator lowers the mark on purpose
(``l3p rollback``).

The marks live outside the model repository, since whoever can write the repository must not be
able to lower them: by default in one file per user, ``$XDG_STATE_HOME/l3p/served-sequences.json``
(``~/.local/state/l3p/served-sequences.json`` when XDG_STATE_HOME is unset; ``l3p serve
--served-sequences FILE`` chooses another), keyed by the repository's real path (``--models
DIR``, or the ``--bundle DIR``) and the model's name. Every change takes an exclusive lock
(``flock`` on ``FILE.lock``) and replaces the file whole (written, fsynced, renamed), so the
processes of ``--processes N`` and ``l3p rollback`` never lose each other's marks and a crash
never leaves half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from l3p.core.bundle_format import BundleError, problem, read_regular
from l3p.core.signing import Signature, signing_time
from l3p.serving.candidates import Candidate

FORMAT = "l3p-served-sequences"
FORMAT_VERSION = 1
MAX_BYTES = 16 << 20


class RollbackError(BundleError):
    """A version is signed with a lower sequence than one this server has served for its model."""


class SequencesFileError(BundleError):
    """The served-sequences file cannot be read or written; signed versions are refused until it can."""


@dataclass(frozen=True)
class Mark:
    """The highest sequence served for a model, and the version and digest that carried it."""

    sequence: int
    version: str
    bundle_sha256: str


def default_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "l3p" / "served-sequences.json"


class ServedSequences:
    """The marks file (``path``, default ``default_path()``). Blocking: use off the event loop."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else default_path()

    @staticmethod
    def key(repository: Path) -> str:
        return os.path.realpath(repository)

    def marks(self, repository: Path) -> dict[str, Mark]:
        """Every model's mark for ``repository``; {} when nothing was recorded yet."""
        return self._marks(self._read(), self.key(repository))

    def record(self, repository: Path, model: str, mark: Mark) -> None:
        """Raises the model's mark to ``mark`` (never lowers it)."""
        with self._locked() as table:
            key = self.key(repository)
            old = self._marks(table, key).get(model)
            if old is None or mark.sequence > old.sequence:
                self._write(table, key, model, mark)

    def set(self, repository: Path, model: str, mark: Mark) -> Mark | None:
        """Sets the model's mark to ``mark``, lower or not (an operator's rollback); the old one. None,
        and the file left as it is (not even made), when it holds no mark for the model: no server
        that keeps its marks here has served a signed version of it, so there is nothing to lower
        (marks are never removed, so the look needs no lock)."""
        if model not in self.marks(repository):
            return None
        with self._locked() as table:
            key = self.key(repository)
            old = self._marks(table, key).get(model)
            self._write(table, key, model, mark)
            return old

    def _read(self) -> dict:
        try:
            data = read_regular(self.path, MAX_BYTES, f"served-sequences file {self.path}")
        except FileNotFoundError:
            return {"format": FORMAT, "format_version": FORMAT_VERSION, "repositories": {}}
        except BundleError as exc:
            raise self._error(str(exc).removeprefix(f"served-sequences file {self.path}: ")) from None
        try:
            table = json.loads(data)
            if (not isinstance(table, dict) or (table.get("format"), table.get("format_version")) != (
                    FORMAT, FORMAT_VERSION) or not isinstance(table.get("repositories"), dict)):
                raise ValueError(f"expected format {FORMAT!r} version {FORMAT_VERSION}")
            return table
        except (ValueError, RecursionError) as exc:
            raise self._error(f"not readable ({problem(exc)[:120]})") from None

    def _error(self, problem: str) -> SequencesFileError:
        return SequencesFileError(f"served-sequences file {self.path}: {problem}; signed versions are refused "
                                  "until it can be read and written (it keeps the highest sequence served per "
                                  "model: fix it, or choose a writable file with --served-sequences FILE)")

    @staticmethod
    def _marks(table: dict, key: str) -> dict[str, Mark]:
        models = table["repositories"].get(key)
        marks = {}
        for model, entry in (models.items() if isinstance(models, dict) else ()):
            try:
                marks[model] = Mark(int(entry["sequence"]), str(entry["version"]), str(entry["bundle_sha256"]))
            except (TypeError, KeyError, ValueError):
                continue
        return marks

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict]:
        """The table, read under an exclusive lock held until the block ends."""
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise self._error(f"cannot lock it ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield self._read()
        finally:
            os.close(fd)  # closing releases the lock

    def _write(self, table: dict, key: str, model: str, mark: Mark) -> None:
        models = table["repositories"].get(key)
        if not isinstance(models, dict):
            models = table["repositories"][key] = {}
        models[model] = {
            "sequence": mark.sequence, "version": mark.version, "bundle_sha256": mark.bundle_sha256}
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        try:
            with open(partial, "w") as file:
                json.dump(table, file, indent=1, sort_keys=True)
                file.flush()
                os.fsync(file.fileno())
            os.replace(partial, self.path)
        except OSError as exc:
            raise self._error(f"cannot write it ({exc.strerror})") from None


def check_sequence(candidate: Candidate, signature: Signature, sequences: ServedSequences) -> None:
    """RollbackError if ``candidate``'s model has served a version signed with a higher sequence
    than ``signature``'s (as ``sequences`` records). Blocking: reads the record."""
    mark = sequences.marks(candidate.base).get(candidate.name)
    if mark is None or signature.sequence >= mark.sequence:
        return
    served = f"{candidate.name}/{mark.version}" if mark.version else candidate.name
    command = f"l3p rollback --models DIR {candidate.name}" if candidate.below else "l3p rollback --bundle DIR"
    if sequences.path != default_path():
        command += " --served-sequences FILE"
    raise RollbackError(
        f"{candidate.label()} is signed with {signature.describe()}, below sequence {mark.sequence} "
        f"(signed {signing_time(mark.sequence)}) of {served}, the highest this server has served for "
        f"{candidate.name}: refusing a rollback (to roll back on purpose, run {command} on the server)")
