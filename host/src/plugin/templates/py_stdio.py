"""Sends `print()` and everything written to stderr (a traceback too) to the crewbox
log. Built with `--stub-wasi`, the component has no real stdout or stderr: writing to
them would trap. Import this module first thing in `app.py`."""

import sys

from wit_world.imports import log


class _ToLog:
    """A text stream whose complete lines become crewbox log messages."""

    def __init__(self, level):
        self._level = level
        self._pending = ""

    def write(self, text):
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            log.log(self._level, line)
        return len(text)

    def flush(self):
        if self._pending:
            log.log(self._level, self._pending)
            self._pending = ""

    def isatty(self):
        return False


sys.stdout = _ToLog(log.Level.INFO)
sys.stderr = _ToLog(log.Level.ERROR)
