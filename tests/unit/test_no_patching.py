"""Importing a2a_flask patches nothing (docs/internals.rst, invariant 7).

A fresh interpreter imports every module of the package (the web side, every
store, the Celery runner, the client, the 0.1 paths); gevent's record of what
it patched stays empty and the standard library's names are still the
originals.  ``gunicorn -k gevent`` patches; a2a_flask only cooperates.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.support.helpers import ROOT

# It imports every module in a fresh interpreter.
pytestmark = pytest.mark.server

SCRIPT = textwrap.dedent("""
    import importlib, pkgutil, socket, ssl, threading, time
    originals = (socket.socket, ssl.SSLContext, threading.Lock, threading.Thread, time.sleep)
    import gevent.monkey
    import a2a_flask
    names = [info.name for info in pkgutil.walk_packages(a2a_flask.__path__, "a2a_flask.")
             if not info.name.endswith("__main__")]  # the CLI's entry point runs it
    for name in names:
        importlib.import_module(name)
    assert not gevent.monkey.saved, sorted(gevent.monkey.saved)
    assert (socket.socket, ssl.SSLContext, threading.Lock, threading.Thread,
            time.sleep) == originals
    print(len(names))
""")


def test_importing_every_module_patches_nothing():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 50  # the walk found the package's modules
