"""Every code block of README.rst and of each ``docs/*.rst`` page runs here (the
README's; the manual's pages in ``test_readme_docs.py``, so that parallel runs
spread the two), as a reader would paste it.

Blocks are collected from the files, so an edit to a page is tested as it is.
Each page is read on its own (its own namespace, shell and server), top to
bottom.  The convention (also for new sections and new pages):

* ``.. code-block:: python`` (and ``::`` literal blocks, read as Python) run in
  page order in one namespace: a block may use names an earlier block of the
  same page defined.
  A block that defines ``test_*`` functions is a pytest module: it is written to
  a file and run by pytest (with the repository on ``sys.path``).
* ``.. code-block:: console`` blocks hold ``$ command`` lines (indented lines
  continue a command) followed by the output they print; ``...`` in the output
  stands for anything.  ``pip install`` commands are not run (the suite runs in
  an installed checkout) but the extras they name must exist; a ``gunicorn``
  command starts a real server in the background, on a free port, replacing the
  one a previous command of the page started.
* Every address ``127.0.0.1:8000`` / ``localhost:8000`` in any block means "the
  server the last gunicorn command started" and is rewritten to its port.
* Any other block (``sh``, ``text``...) cannot run as it is: it must carry a
  reST comment ``.. not-run: <reason>`` as the last thing before it.  Use it
  sparingly; the reason is required.
"""
from __future__ import annotations

import configparser
import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
import requests

from a2a_flask.config import config_key, field_default, field_types, kind_of, read_value

from tests.support.helpers import ROOT, free_port, stop_process_group

README = ROOT / "README.rst"
#: The pages whose blocks run: the README, then the manual's pages in name order.
PAGES = [README] + sorted((ROOT / "docs").glob("*.rst"))
#: The settings table and its type legend (moved from the README).
CONFIGURATION = ROOT / "docs" / "configuration.rst"
ADDRESS = re.compile(r"(127\.0\.0\.1|localhost):8000\b")
NOT_RUN = re.compile(r"^\.\. not-run:(.*)$")
DIRECTIVE = re.compile(r"^(\s*)\.\. (?:code-block|code|sourcecode)::\s*(\S*)\s*$")

pytestmark = pytest.mark.timeout(300)


# ------------------------------------------------------------------ collecting


@dataclass
class Block:
    page: str  # the file, relative to the repository (``docs/protocol.rst``)
    section: str
    language: str
    text: str
    line: int  # 1-based line of the directive (or of the paragraph ending in ``::``)
    not_run: Optional[str] = None

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")
        return f"{Path(self.page).stem}-{slug}-L{self.line}"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _body(lines: List[str], start: int, parent_indent: int) -> Tuple[str, int]:
    """The indented block after line ``start``: (dedented text, index after it)."""
    i = start + 1
    while i < len(lines) and lines[i].strip().startswith(":") and _indent(lines[i]) > parent_indent:
        i += 1  # directive options
    body: List[str] = []
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > parent_indent):
        body.append(lines[i])
        i += 1
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    margin = min((_indent(b) for b in body if b.strip()), default=0)
    return "\n".join(b[margin:] for b in body), i


def _marker_before(lines: List[str], index: int) -> Tuple[Optional[str], Optional[int]]:
    """The ``.. not-run:`` reason on the last non-blank line before ``index``."""
    j = index - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    match = NOT_RUN.match(lines[j].strip()) if j >= 0 else None
    return (match.group(1).strip(), j) if match else (None, None)


def collect(text: str, page: str = "README.rst") -> Tuple[List[Block], List[int]]:
    """The code blocks of a reST text, and the lines of ``.. not-run:`` markers
    that precede no block (0-based)."""
    lines = text.splitlines()
    blocks: List[Block] = []
    used_markers = set()
    section = "(top)"
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and re.fullmatch(r"([-=~^])\1{2,}", nxt.strip()) and \
                len(nxt.strip()) >= len(line.strip()):
            section = line.strip()
            i += 2
            continue
        directive = DIRECTIVE.match(line)
        literal = (not directive and line.rstrip().endswith("::")
                   and not line.lstrip().startswith(".."))
        if directive or literal:
            if directive:
                language, anchor = directive.group(2) or "text", i
            else:
                language, anchor = "python", i
                while anchor > 0 and lines[anchor - 1].strip():
                    anchor -= 1  # the marker goes before the paragraph
            reason, marker = _marker_before(lines, anchor)
            if marker is not None:
                used_markers.add(marker)
            body, after = _body(lines, i, _indent(line))
            if body:
                blocks.append(Block(page, section, language, body, i + 1, reason))
            i = after
            continue
        i += 1
    stray = [n for n, l in enumerate(lines) if NOT_RUN.match(l.strip()) and n not in used_markers]
    return blocks, stray


def _collect_pages() -> Tuple[List[Block], List[str]]:
    blocks: List[Block] = []
    stray: List[str] = []
    for path in PAGES:
        name = path.relative_to(ROOT).as_posix()
        found, unused = collect(path.read_text(encoding="utf-8"), name)
        blocks += found
        stray += [f"{name}:{n + 1}" for n in unused]
    return blocks, stray


BLOCKS, STRAY_MARKERS = _collect_pages()
#: The blocks a reader can paste; the not-run ones are checked for a reason by
#: test_the_collector_sees_the_readme_blocks (a test per block would only skip).
RUN = [b for b in BLOCKS if b.not_run is None]


def test_the_collector_sees_the_readme_blocks():
    languages = {b.language for b in BLOCKS if b.page == "README.rst"}
    assert {"python", "console"} <= languages
    assert {"README.rst", "docs/observability.rst", "docs/quickstart.rst"} <= {b.page for b in RUN}
    assert not STRAY_MARKERS, STRAY_MARKERS
    for block in BLOCKS:
        if block.not_run is not None:
            assert len(block.not_run) >= 10, f"{block.where}: give a real reason"
        elif block.language not in ("python", "console"):
            pytest.fail(f"{block.where} ({block.section}): no runner for "
                        f"{block.language!r} blocks; write it as a console block with $ prompts, "
                        "or put '.. not-run: <reason>' right before it")


def test_the_collector_reads_rest_as_written():
    blocks, stray = collect("""Title
=====

Text::

    x = 1

.. not-run: needs a database

.. code-block:: sh

    psql

.. code-block:: python
   :linenos:

    y = x + 1

    z = y

Other
-----

.. not-run: dangling
""")
    assert {b.page for b in blocks} == {"README.rst"}
    assert [(b.section, b.language, b.text, b.not_run) for b in blocks] == [
        ("Title", "python", "x = 1", None), ("Title", "sh", "psql", "needs a database"),
        ("Title", "python", "y = x + 1\n\nz = y", None)]
    assert stray == [23]


# ------------------------------------------------------------------ running


@dataclass
class Outcome:
    error: Optional[str] = None


@dataclass
class Reader:
    """Pastes one page's blocks in order: one Python namespace, one shell, one server."""

    tmp: Path
    namespace: Dict[str, Any] = field(default_factory=lambda: {"__name__": "readme"})
    server: Optional[subprocess.Popen] = None
    port: int = 0
    logs: List[Path] = field(default_factory=list)

    def env(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_")}
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = str(ROOT)
        return env

    def localise(self, text: str) -> str:
        return ADDRESS.sub(lambda m: f"{m.group(1)}:{self.port or 8000}", text)

    def run(self, block: Block) -> None:
        if block.language == "console":
            self.console(block)
        elif block.language != "python":
            raise AssertionError(f"no runner for {block.language!r} blocks (see the module "
                                 "docstring of tests/server/test_readme.py)")
        elif re.search(r"^def test_", block.text, re.M):
            self.pytest_module(block)
        else:
            code = compile(self.localise(block.text), block.where, "exec")
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, self.namespace)

    def pytest_module(self, block: Block) -> None:
        module = self.tmp / f"test_readme_block_{Path(block.page).stem}_{block.line}.py"
        module.write_text(self.localise(block.text) + "\n")
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 str(module)], cwd=self.tmp, env=self.env(), capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0 and " passed" in result.stdout, result.stdout + result.stderr

    def console(self, block: Block) -> None:
        for command, expected in parse_console(block.text):
            if re.match(r"pip install\b", command):
                check_extras(command)
            elif "gunicorn" in shlex.split(command.replace("\\\n", " "))[:3]:
                self.serve(command)
            else:
                self.shell(command, expected)

    def shell(self, command: str, expected: str) -> None:
        result = subprocess.run(["bash", "-c", self.localise(command)], cwd=ROOT, env=self.env(),
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (command, result.stdout, result.stderr)
        pattern = ".*".join(re.escape(part) for part in self.localise(expected).split("..."))
        assert re.fullmatch(pattern, result.stdout.rstrip("\n"), re.S), \
            f"$ {command}\nexpected:\n{expected}\ngot:\n{result.stdout}"

    def serve(self, command: str) -> None:
        """Like a reader's Ctrl-C on the last server, then the new command, on a free port."""
        self.stop()
        self.port = free_port()
        log = self.tmp / f"gunicorn-{self.port}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.server = subprocess.Popen(["bash", "-c", "exec env " + self.localise(command)],
                                           cwd=ROOT, env=self.env(), stdout=out,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.server.poll() is None, f"{command} exited: {log.read_text()}"
            try:
                requests.get(f"http://127.0.0.1:{self.port}/", timeout=5)
                return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.1)
        raise AssertionError(f"{command} did not start serving within 60 s")

    def stop(self) -> None:
        if self.server is not None:  # a reader's Ctrl-C (gunicorn's quick stop)
            stop_process_group(self.server, signal.SIGINT)
            self.server = None


def parse_console(text: str) -> List[Tuple[str, str]]:
    """``$ command`` lines (indented lines continue them) and the output after each."""
    found: List[Tuple[str, List[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found and line[:1].isspace() and not found[-1][1]:
            found[-1] = (found[-1][0] + "\n" + line, [])
        elif found:
            found[-1][1].append(line)
        else:
            raise AssertionError(f"console block output before any $ command: {line!r}")
    return [(command, "\n".join(output)) for command, output in found]


EXTRAS = configparser.ConfigParser()
EXTRAS.read(ROOT / "setup.cfg")


def check_extras(command: str) -> None:
    """The extras a ``pip install`` names exist (``-e ".[redis]"``, ``'a2a-flask[redis]'``)."""
    declared = set(EXTRAS["options.extras_require"])
    for group in re.findall(r"\[([^\]]+)\]", command):
        for extra in group.split(","):
            assert extra.strip() in declared, f"{command}: no extra {extra.strip()!r} in setup.cfg"


def paste(blocks: List[Block], tmp_path_factory: Any) -> Dict[str, Outcome]:
    """Every one of ``blocks``, each page in its own reader, in page order; each
    block's outcome by ``page:line``."""
    outcomes: Dict[str, Outcome] = {}
    for page in dict.fromkeys(b.page for b in blocks):
        reader = Reader(tmp_path_factory.mktemp("readme"))
        try:
            for block in (b for b in blocks if b.page == page):
                try:
                    reader.run(block)
                    outcomes[block.where] = Outcome()
                except Exception:
                    outcomes[block.where] = Outcome(error=traceback.format_exc())
        finally:
            reader.stop()
    return outcomes


#: The README's blocks (the manual's: test_readme_docs.py).
HERE = [b for b in RUN if b.page == "README.rst"]


@pytest.fixture(scope="module")
def pasted(tmp_path_factory) -> Dict[str, Outcome]:
    """The outcome of each README block a reader can paste, by ``page:line``."""
    return paste(HERE, tmp_path_factory)


@pytest.mark.parametrize("block", HERE, ids=[b.id for b in HERE])
def test_block_runs(block, pasted):
    outcome = pasted[block.where]
    assert outcome.error is None, f"{block.where} ({block.section}):\n{outcome.error}"


def test_every_pip_install_in_the_readme_names_real_extras():
    commands = re.findall(r"pip install [^`\n]+", README.read_text())
    assert any("-e" in c and "[" in c for c in commands)  # for a checkout
    for command in commands:
        check_extras(command)
    for page in PAGES[1:]:  # the manual's, run or not
        for command in re.findall(r"pip install [^`\n]+", page.read_text(encoding="utf-8")):
            check_extras(command)


def test_the_readme_links_files_of_a_fresh_clone():
    """Its links to the manual are paths in the repository (GitHub and a clone show
    them; the Sphinx manual does not include the README), and each file exists."""
    targets = re.findall(r"`[^`<]+<([^>`]+)>`_", README.read_text())
    local = [t for t in targets if "://" not in t]
    assert {"docs/protocol.rst", "docs/configuration.rst", "docs/operating.rst",
            "docs/observability.rst", "docs/internals.rst", "bench/README.rst"} <= set(local)
    assert [t for t in local if not (ROOT / t).is_file()] == []


# ------------------------------------------------------------------ the settings table


def config_table(text: str) -> Dict[str, Tuple[str, str]]:
    """``A2A_X`` -> (type, default) from the settings table of docs/configuration.rst."""
    rows: Dict[str, Tuple[str, str]] = {}
    lines = text.splitlines()
    header = next(i for i, l in enumerate(lines) if l.startswith("Key ") and "Default" in l)
    border = lines[header - 1]
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", border)]
    for line in lines[header + 2:]:
        if line == border:
            break
        cells = [line[a:b if n < len(spans) - 1 else None].strip()
                 for n, (a, b) in enumerate(spans)]
        if cells[0]:
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def test_the_settings_table_lists_every_setting_with_its_type_and_default():
    rows = config_table(CONFIGURATION.read_text())
    expected = {config_key(name): tp for name, tp in field_types().items()}
    assert sorted(rows) == sorted(expected), (
        f"missing: {sorted(set(expected) - set(rows))}, unknown: {sorted(set(rows) - set(expected))}")
    for key, tp in expected.items():
        kind, default_cell = rows[key]
        assert kind == kind_of(tp).name, f"{key}: the table says {kind!r}, Settings {kind_of(tp).name!r}"
        default = field_default(key[len("A2A_"):].lower())
        literal = re.search(r"``([^`]*)``", default_cell)
        if literal:
            assert read_value(key, tp, literal.group(1)) == default, (key, default_cell, default)
        elif default is None:
            assert default_cell.startswith("unset"), (key, default_cell)
        else:
            assert default in ("", ()) and default_cell.startswith("empty"), (key, default_cell)


def test_the_type_legend_names_every_kind_of_setting():
    text = CONFIGURATION.read_text()
    legend = text[text.index("Type   "):text.index("Key   ")]
    for tp in field_types().values():
        assert re.search(rf"^{re.escape(kind_of(tp).name.replace(' or unset', ''))}\s{{2,}}",
                         legend, re.M), kind_of(tp).name
