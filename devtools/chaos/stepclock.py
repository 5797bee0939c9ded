"""The chaos engines' clock: the wall clock plus an offset the injector writes
to a file, so a ``clock_step`` fault can step one engine's clock forward and
back while it runs.

Why a file and an injected clock: the engine clock is injectable
(``Engine(clock=...)``, SPEC §4.4) and every claim time an engine writes or
compares (expiry, renewal, takeover, timers) is read from it, so stepping it
is what a host's clock step (an NTP correction) does to that engine, without
touching the machine's clock, the other engines or the database's. The
engines are separate processes started by the harness: the only channel in is
the file named by ``CLOCK_FILE_ENV`` in their environment.

Imported by each chaos engine (``tests.procs.worker`` imports it for a
standalone engine, ``celery worker -I`` for a node and its pool processes)
before any engine is built: ``install()`` makes every ``Engine`` built without
an explicit clock use ``FileOffsetClock`` (an injected clock also skips the
boot-time skew check, which would otherwise refuse an engine booting while
its slot's clock is stepped). Nothing of ``weft_django`` changes.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from weft_django.kernel.clock import wall_ms

#: The environment variable naming an engine's offset file.
CLOCK_FILE_ENV = "WEFT_CHAOS_CLOCK_FILE"


class FileOffsetClock:
    """``wall_ms()`` plus the integer ms offset in ``path`` (0 while it is absent).

    The file is re-read only when it was replaced (inode or mtime changed), so
    a read costs one ``stat``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._offset = 0

    def offset_ms(self) -> int:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._offset = None, 0
            return 0
        seen = (stat.st_ino, stat.st_mtime_ns)
        if seen != self._seen:
            text = self.path.read_text().strip()
            self._offset = int(text or 0)
            self._seen = seen
        return self._offset

    def __call__(self) -> int:
        return wall_ms() + self.offset_ms()


def write_offset(path: Path, offset_ms: int) -> None:
    """Set an engine's offset atomically (a reader never sees half a number)."""
    scratch = path.with_suffix(".tmp")
    scratch.write_text(f"{int(offset_ms)}\n")
    os.replace(scratch, path)


def install() -> bool:
    """Give every ``Engine`` of this process the file clock, if the harness named one."""
    name = os.environ.get(CLOCK_FILE_ENV)
    if not name:
        return False
    from weft_django.engine import Engine

    if getattr(Engine.__init__, "_chaos_clock", False):
        return True
    original = Engine.__init__
    clock = FileOffsetClock(Path(name))

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kw: Any) -> None:
        if len(args) >= 2:  # Engine(engine_id, clock, ...)
            args = (args[0], args[1] if args[1] is not None else clock, *args[2:])
        elif kw.get("clock") is None:
            kw["clock"] = clock
        original(self, *args, **kw)

    __init__._chaos_clock = True  # type: ignore[attr-defined]
    Engine.__init__ = __init__  # type: ignore[method-assign]
    return True


install()
