"""Sphinx configuration: ``sphinx-build -W -b html docs docs/_build/html``.

Needs the package and the ``docs`` extra installed (``pip install -e ".[docs]"``);
autodoc imports ``a2a_flask`` to read its docstrings.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, List

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer

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
# The redis client is an optional extra; the page for RedisStore needs no server.
autodoc_mock_imports = ["redis"]
# Type hints name classes of other layers; those without a page of their own
# are shown as text instead of failing the build on an unresolved reference.
nitpicky = False


class ConfigKeys(Directive):
    """``.. a2a-config-keys::``: a table of every ``A2A_*`` key, built from
    :class:`a2a_flask.config.Settings` (its fields, defaults and ``#:`` comments),
    so the page cannot drift from the code."""

    has_content = False

    def run(self) -> List[nodes.Node]:
        from a2a_flask.config import Settings

        comments = ModuleAnalyzer.for_module("a2a_flask.config").find_attr_docs()
        table = nodes.table()
        group = nodes.tgroup(cols=3)
        table += group
        for width in (30, 16, 54):
            group += nodes.colspec(colwidth=width)
        head = nodes.row()
        for title in ("Key", "Default", "Meaning"):
            head += nodes.entry("", nodes.paragraph(title, title))
        group += nodes.thead("", head)
        body = nodes.tbody()
        for field in dataclasses.fields(Settings):
            doc = " ".join(line.strip() for line in comments.get(("Settings", field.name), []))
            row = self._row(["A2A_" + field.name.upper(), _default(field)])
            meaning, messages = self.state.inline_text(doc or "As above.", self.lineno)
            row += nodes.entry("", nodes.paragraph("", "", *meaning, *messages))
            body += row
        group += body
        return [table]

    @staticmethod
    def _row(cells: List[str]) -> nodes.row:
        row = nodes.row()
        for text in cells:
            row += nodes.entry("", nodes.paragraph("", "", nodes.literal(text, text)))
        return row


def _default(field: "dataclasses.Field[Any]") -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    return "(set by the app)"


def setup(app: Sphinx) -> None:
    app.add_directive("a2a-config-keys", ConfigKeys)
