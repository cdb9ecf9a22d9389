"""Sends `print()` and stderr to the crewbox log, and an uncaught exception's message
and stack to it before the plugin fails. Built with `--stub-wasi`, the component has no
real stdout, stderr or files: writing to them, or printing a traceback (which reads the
source files), would trap with nothing said. Import this module first thing in
`app.py` and decorate the exported class with `@guarded`."""

import functools
import sys
import traceback

from componentize_py_types import Err
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


def _report(e: BaseException) -> None:
    """Logs `Type: message` and the stack without reading any source file."""
    frames = traceback.StackSummary.extract(traceback.walk_tb(e.__traceback__), lookup_lines=False)
    lines = [f"{type(e).__name__}: {e}"]
    lines += [f"at {f.filename}:{f.lineno} in {f.name}" for f in frames if not f.filename.endswith("crewbox_stdio.py")]
    log.log(log.Level.ERROR, "\n".join(lines))


def guarded(cls):
    """Wraps the exported methods of `cls`: an exception other than `Err` (which is the
    `err` answer) is logged, then raised on, so the host reports a plugin fault with
    its message."""
    for name, method in list(vars(cls).items()):
        if name.startswith("_") or not callable(method):
            continue

        def wrap(method):
            @functools.wraps(method)
            def call(*args, **kwargs):
                try:
                    return method(*args, **kwargs)
                except Err:
                    raise
                except BaseException as e:
                    _report(e)
                    raise

            return call

        setattr(cls, name, wrap(method))
    return cls
