"""Every code block of each ``docs/*.rst`` page runs, as a reader would paste it: the
convention and the runner are in ``test_readme.py`` (which runs the README's); the
pages are a file of their own so that parallel runs spread the two.
"""
from __future__ import annotations

from typing import Dict

import pytest

from tests.server.test_readme import RUN, Outcome, paste

pytestmark = pytest.mark.timeout(300)

#: The manual's blocks, page by page.
HERE = [b for b in RUN if b.page != "README.rst"]


@pytest.fixture(scope="module")
def pasted(tmp_path_factory) -> Dict[str, Outcome]:
    """The outcome of each block of the manual a reader can paste, by ``page:line``."""
    return paste(HERE, tmp_path_factory)


@pytest.mark.parametrize("block", HERE, ids=[b.id for b in HERE])
def test_block_runs(block, pasted):
    outcome = pasted[block.where]
    assert outcome.error is None, f"{block.where} ({block.section}):\n{outcome.error}"
