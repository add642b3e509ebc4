"""The server's logs on stderr, one line per event: JSON (ts, level, logger, pid, event, then the
event's fields), so a log shipper needs no parsing rules, or text for a person (time, level, event,
then ``key=value`` fields); by default text on a terminal and JSON otherwise (``--log-format``).

Native code (gRPC's core, onnxruntime) writes its own messages straight to file descriptor 2;
`configure_logging(..., capture_native=True)` routes them through a pipe into the same lines (event
``native_log``), so text a client chose (a TLS server name, say) arrives escaped (inside a JSON
string, or quoted in a text line), never as a raw line. Events a client can cause at will (refused
calls, native messages) go through a `RateLimit`: a flood of bad calls costs a few lines a second,
each saying how many were left out since the last.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("l3p.serving")

# Events a client can cause at will: at most BURST lines at once, then PER_S a second, per event.
LOG_BURST = 20
LOG_PER_S = 5.0
# Longer native messages are cut: one line each, of bounded size.
MAX_NATIVE_CHARS = 500

# gRPC core's (absl) format: "E1124 18:39:42.657818    5706 file.cc:3238] message".
_NATIVE_LINE = re.compile(r"([DIWEF])\d{4} [\d:.]+\s+\d+ ([^\]\s]+)\] ?(.*)")
_NATIVE_LEVEL = {"D": logging.DEBUG, "I": logging.INFO, "W": logging.WARNING,
                 "E": logging.ERROR, "F": logging.CRITICAL}

LOG_FORMATS = ("text", "json")
# The level of the lines each episode writes (started, ended, expired): a busy server starts
# thousands, so they show with --log-level debug only.
SESSIONS = logging.DEBUG
# A text field's value goes unquoted when it is made of these; anything else is a JSON string, so
# text a client chose (spaces, newlines, control characters) cannot forge a line.
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+=-]+")


def event(level: int, name: str, exc_info: BaseException | None = None, **fields) -> None:
    """Logs event `name` with its fields (and the traceback of exc_info, if given)."""
    # The record is made here, not by log.log(), which walks the stack for a file and line the
    # lines do not carry: a saving on every session start and end.
    if log.isEnabledFor(level):
        info = None if exc_info is None else (type(exc_info), exc_info, exc_info.__traceback__)
        log.handle(log.makeRecord(log.name, level, "", 0, name, None, info, extra={"fields": fields}))


class RateLimit:
    """A token bucket per event name: `allow(name)` -> None to leave the line out, else the number
    of lines left out since the last one allowed (0 or more). Thread-safe."""

    def __init__(self, burst: int = LOG_BURST, per_s: float = LOG_PER_S,
                 clock: Callable[[], float] = time.monotonic):
        self._burst, self._per_s, self._clock = burst, per_s, clock
        self._buckets: dict[str, list[float]] = {}  # name -> [tokens, last refill, left out]
        self._lock = threading.Lock()

    def allow(self, name: str) -> int | None:
        now = self._clock()
        with self._lock:
            bucket = self._buckets.setdefault(name, [float(self._burst), now, 0])
            bucket[0] = min(self._burst, bucket[0] + (now - bucket[1]) * self._per_s)
            bucket[1] = now
            if bucket[0] < 1:
                bucket[2] += 1
                return None
            bucket[0] -= 1
            left_out, bucket[2] = int(bucket[2]), 0
            return left_out


_limit = RateLimit()


def limited_event(level: int, name: str, limit: RateLimit = _limit, **fields) -> None:
    """`event`, at most LOG_BURST lines at once and LOG_PER_S a second for this name (or as
    `limit` allows); a line after some were left out says how many (``suppressed``)."""
    left_out = limit.allow(name)
    if left_out is not None:
        event(level, name, **fields, **({"suppressed": left_out} if left_out else {}))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, pid, event, then the event's fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
            .isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,  # tells apart the processes of --processes N
            "event": record.getMessage(),
            **getattr(record, "fields", {}),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """One line per event for a person: local time, level, event, then the fields as key=value."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created).strftime("%H:%M:%S.%f")[:-3]
        words = [when, f"{record.levelname.lower():<7}", _text(record.getMessage(), quote=False)]
        words += [f"{key}={_text(value)}" for key, value in getattr(record, "fields", {}).items()]
        line = " ".join(words)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text(value: object, quote: bool = True) -> str:
    """A string as it is when plain, else as a JSON string; anything else as compact JSON (its
    strings escaped: no value can start a line of its own)."""
    if not isinstance(value, str):
        return json.dumps(value, default=str, separators=(",", ":"))
    if _PLAIN.fullmatch(value):
        return value
    escaped = json.dumps(value)
    return escaped if quote else escaped[1:-1]


def configure_logging(level: str, capture_native: bool = False, log_format: str | None = None) -> None:
    """Lines at `level` (debug, info, warning, error) on stderr, for every logger, in `log_format`
    (text or json; None: text on a terminal, json otherwise); with `capture_native`, native code's
    writes to stderr too (for a server process: call once)."""
    stream = _capture_native_stderr() if capture_native else sys.stderr
    handler = logging.StreamHandler(stream)
    if log_format is None:
        log_format = "text" if stream.isatty() else "json"
    handler.setFormatter(TextFormatter() if log_format == "text" else JsonFormatter())
    # Records need no thread or process names (JsonFormatter writes the pid only).
    logging.logThreads = logging.logMultiprocessing = False
    # The root logger, so grpc's Python messages are lines of the same format; Python's warnings
    # (numpy's RuntimeWarnings, say) too, never a raw line on stderr.
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    logging.captureWarnings(True)


def _capture_native_stderr():
    """Points fd 2 at a pipe read by a daemon thread that logs each line as an event; Python's
    own stderr (the log lines, a one-line startup error) goes on to the real stderr. Returns
    that stream."""
    sys.stderr.flush()
    real = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="backslashreplace")
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    sys.stderr = real
    threading.Thread(target=_pump_native, args=(read_fd,), name="l3p-native-log", daemon=True).start()
    return real


def _pump_native(read_fd: int) -> None:
    with os.fdopen(read_fd, "rb") as pipe:
        for raw in pipe:
            text = raw.decode("utf-8", errors="backslashreplace").rstrip("\n")
            if not text.strip():
                continue
            match = _NATIVE_LINE.match(text)
            level, source, message = ((_NATIVE_LEVEL[match[1]], match[2], match[3]) if match
                                      else (logging.WARNING, None, text))
            if len(message) > MAX_NATIVE_CHARS:
                message = message[:MAX_NATIVE_CHARS] + f"... ({len(message)} characters)"
            limited_event(level, "native_log", source=source, message=message)
