"""The server's logs: JSON lines on stderr, one object per event (ts, level, logger, pid, event,
then the event's fields), so a log shipper needs no parsing rules."""

from __future__ import annotations

import datetime
import json
import logging
import sys

log = logging.getLogger("l3p.serving")


def event(level: int, name: str, exc_info: BaseException | None = None, **fields) -> None:
    """Logs event `name` with its fields (and the traceback of exc_info, if given)."""
    # The record is made here, not by log.log(), which walks the stack for a file and line the
    # JSON lines do not carry: a saving on every session start and end.
    if log.isEnabledFor(level):
        info = None if exc_info is None else (type(exc_info), exc_info, exc_info.__traceback__)
        log.handle(log.makeRecord(log.name, level, "", 0, name, None, info, extra={"fields": fields}))


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


def configure_logging(level: str) -> None:
    """JSON lines at `level` (debug, info, warning, error) on stderr, for every logger."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    # Records need no thread or process names (JsonFormatter writes the pid only).
    logging.logThreads = logging.logMultiprocessing = False
    # The root logger, so grpc's own messages are JSON lines too.
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
