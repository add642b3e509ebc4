"""Expected failures and their exit codes. Each is reported by the `l3p` command as one line
(``l3p COMMAND: error: MESSAGE``), never a traceback."""

from __future__ import annotations

USAGE = 2  # bad arguments, unusable files: the user can fix the call
UNAVAILABLE = 1  # the planner server failed or could not be reached
INTERRUPTED = 130  # SIGINT / SIGTERM


class L3PError(Exception):
    """An expected failure the user can act on; ``exit_code`` is the command's exit status."""

    exit_code = USAGE
