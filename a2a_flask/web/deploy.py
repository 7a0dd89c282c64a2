"""Facts about the server process we run in (for start-up warnings), and its tuning."""
from __future__ import annotations

import atexit
import gc
import os
import shlex
import signal
from types import FrameType
from typing import Any, Callable, Dict, List, Optional

from ..concurrency import Worker


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


def _master_args() -> Optional[List[str]]:
    """The gunicorn master's command line, or None when our parent is no gunicorn."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            master = [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return None
    return master if any("gunicorn" in part for part in master[:3]) else None


def _option(args: List[str], name: str) -> Optional[str]:
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def graceful_timeout() -> float:
    """The master's ``--graceful-timeout`` (command line, then ``GUNICORN_CMD_ARGS``;
    gunicorn's default of 30 s otherwise: a config file's value is not visible here)."""
    for args in (_master_args() or [], shlex.split(os.environ.get("GUNICORN_CMD_ARGS", ""))):
        value = _option(args, "--graceful-timeout")
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                pass
    return 30.0


def on_worker_shutdown(stop: Callable[[float], None]) -> bool:
    """In a gunicorn worker, call ``stop(grace)`` when the worker is told to stop.

    On SIGTERM (a stop, or the old workers of a ``HUP`` reload) gunicorn's own
    handler runs first, then ``stop`` starts in the background with most of the
    graceful timeout as its grace.  At the process's exit ``stop`` runs too: it
    waits for a stop already under way, gives the runs the same grace when the
    worker ends by itself (gunicorn's ``--max-requests`` recycling sends no
    signal), and fails at once what a quick ``SIGINT`` or ``SIGQUIT`` exit leaves
    running.  Returns False (and does nothing) outside a gunicorn worker's main
    thread (or an OS thread other than the main one).
    """
    if _master_args() is None:
        return False
    total = graceful_timeout()
    # Keep a margin to write the failures before the master's SIGKILL.
    grace = max(0.0, total - max(0.5, total / 10))
    previous: Dict[int, Any] = {signum: signal.getsignal(signum)
                                for signum in (signal.SIGTERM, signal.SIGQUIT, signal.SIGINT)}
    quick: List[int] = []

    def on_term(signum: int, frame: Optional[FrameType]) -> None:
        handler = previous[signum]
        if callable(handler):
            handler(signum, frame)
        Worker(lambda: stop(grace), name="a2a-shutdown")

    def on_quick(signum: int, frame: Optional[FrameType]) -> None:
        quick.append(signum)  # gunicorn's quick shutdown: the exit fails what runs
        handler = previous[signum]
        if callable(handler):
            handler(signum, frame)

    try:
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGQUIT, on_quick)
        signal.signal(signal.SIGINT, on_quick)
    except ValueError:  # not the process's main thread (a threaded worker)
        return False
    signal.siginterrupt(signal.SIGTERM, False)  # as gunicorn sets it: no EINTR in requests
    atexit.register(lambda: stop(0.0 if quick else grace))
    return True


#: Connections one worker serves at once when the server does not say (gunicorn's
#: default ``--worker-connections``).
WORKER_CONNECTIONS = 1000
#: The share of a worker's connections anonymous streams may hold by default: the rest
#: stays for authenticated callers, cards, sends and health checks.
ANONYMOUS_SHARE = 4


def _gunicorn_args() -> Optional[List[str]]:
    """gunicorn's command line: this process's own (a worker is a fork of the master,
    and ``--preload`` loads the app in the master), else the parent's."""
    try:
        with open("/proc/self/cmdline", "rb") as handle:
            own = [part.decode(errors="replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        own = []
    return own if any("gunicorn" in part for part in own[:3]) else _master_args()


def worker_connections() -> Optional[int]:
    """The connections each gunicorn worker serves at once (``--worker-connections``
    on its command line, then in ``GUNICORN_CMD_ARGS``; gunicorn's default of 1000
    otherwise: a config file's value is not visible here); None outside gunicorn."""
    args = _gunicorn_args()
    if args is None:
        return None
    for found in (args, shlex.split(os.environ.get("GUNICORN_CMD_ARGS", ""))):
        value = _option(found, "--worker-connections")
        if value is not None and value.isdigit() and int(value) > 0:
            return int(value)
    return WORKER_CONNECTIONS


def anonymous_stream_limit(configured: Optional[int]) -> int:
    """``A2A_MAX_ANONYMOUS_STREAMS``, or when unset a quarter of the worker's
    connections (:func:`worker_connections`, 1000 when no server says): anonymous
    streams then never take the whole worker, whatever one client opens."""
    if configured is not None:
        return configured
    return max(1, (worker_connections() or WORKER_CONNECTIONS) // ANONYMOUS_SHARE)


def gunicorn_workers() -> Optional[int]:
    """How many workers the gunicorn master above this process runs, if we can tell.

    Reads the master's command line (``-w``/``--workers``), then
    ``GUNICORN_CMD_ARGS`` and ``WEB_CONCURRENCY``, as gunicorn does; None when
    this is not a gunicorn worker or the count is not visible.
    """
    master = _master_args()
    if master is None:
        return None
    found = _parse_workers(master)
    if found is None:
        found = _parse_workers(shlex.split(os.environ.get("GUNICORN_CMD_ARGS", "")))
    if found is None and os.environ.get("WEB_CONCURRENCY", "").isdigit():
        found = int(os.environ["WEB_CONCURRENCY"])
    return found if found is not None else 1


def configured_workers() -> Optional[int]:
    """How many workers the environment asks gunicorn for (``GUNICORN_CMD_ARGS``,
    then ``WEB_CONCURRENCY``), read outside gunicorn (``flask a2a doctor``); None
    when it does not say."""
    found = _parse_workers(shlex.split(os.environ.get("GUNICORN_CMD_ARGS", "")))
    if found is None and os.environ.get("WEB_CONCURRENCY", "").isdigit():
        found = int(os.environ["WEB_CONCURRENCY"])
    return found


def collect_fully_every(middle_collections: int) -> None:
    """Let Python's full garbage collection wait for ``middle_collections`` collections of
    the middle generation (``A2A_GC_FULL_EVERY``; Python waits for 10).

    A store in memory keeps every task's events as objects for as long as the task
    is kept, and each full pass walks all of them although refcounting already frees
    them (they form no cycles): measured on a gevent worker streaming from the memory
    store, full passes took about a fifth of its time.  Young garbage is collected
    as before; only cycles that outlived two collections wait longer.  The setting
    only ever raises the threshold, so the largest value asked for wins.
    """
    young, middle, full = gc.get_threshold()
    if middle_collections > full:
        gc.set_threshold(young, middle, middle_collections)
