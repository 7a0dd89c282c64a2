"""Facts about the server process we run in, for start-up warnings."""
from __future__ import annotations

import os
import shlex
from typing import List, Optional


def _parse_workers(args: List[str]) -> Optional[int]:
    for index, arg in enumerate(args):
        value = None
        if arg in ("-w", "--workers") and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith("--workers="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-w") and arg[2:].isdigit():
            value = arg[2:]
        if value is not None and value.isdigit():
            return int(value)
    return None


def gunicorn_workers() -> Optional[int]:
    """How many workers the gunicorn master above this process runs, if we can tell.

    Reads the master's command line (``-w``/``--workers``), then
    ``GUNICORN_CMD_ARGS`` and ``WEB_CONCURRENCY``, as gunicorn does; None when
    this is not a gunicorn worker or the count is not visible.
    """
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            master = [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return None
    if not any("gunicorn" in part for part in master[:3]):
        return None
    found = _parse_workers(master)
    if found is None:
        found = _parse_workers(shlex.split(os.environ.get("GUNICORN_CMD_ARGS", "")))
    if found is None and os.environ.get("WEB_CONCURRENCY", "").isdigit():
        found = int(os.environ["WEB_CONCURRENCY"])
    return found if found is not None else 1
