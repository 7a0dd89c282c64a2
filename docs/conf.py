"""Sphinx configuration: ``sphinx-build -W -b html docs docs/_build/html``.

Needs the package and the ``docs`` extra installed (``pip install -e ".[docs]"``);
autodoc imports ``a2a_flask`` to read its docstrings.
"""
from __future__ import annotations

import os
import sys
from typing import List

# The checkout's package wins over an installed one, so the docs describe this tree.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from a2a_flask.version import __version__  # noqa: E402

project = "a2a_flask"
author = "the a2a_flask authors"
copyright = "2026, the a2a_flask authors"  # noqa: A001  (Sphinx's name for it)
release = __version__
version = ".".join(__version__.split(".")[:2])

extensions = ["sphinx.ext.autodoc"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: List[str] = []

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": True}
# Optional imports: the redis client (an extra; the page for RedisStore needs no
# server) and pytest (the store contract suite imports it; the docs extra lacks it).
autodoc_mock_imports = ["redis", "pytest"]
# Type hints name classes of other layers; those without a page of their own
# are shown as text instead of failing the build on an unresolved reference.
nitpicky = False
