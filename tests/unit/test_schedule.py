"""tests/support/schedule.py: the order xdist hands out the test files."""
from __future__ import annotations

from types import SimpleNamespace

from tests.support import schedule
from tests.support.helpers import ROOT


def test_every_listed_file_is_a_test_file():
    """A file renamed or split since it was timed is listed under its new name."""
    missing = [path for path in schedule.FILE_SECONDS if not (ROOT / path).is_file()]
    assert not missing, missing


def test_the_longest_files_go_first_each_file_s_tests_together_in_their_order():
    listed = "tests/web/test_celery.py"
    names = ["tests/unit/a.py::t1", "tests/unit/b.py::t1", "tests/unit/a.py::t2",
             f"{listed}::t1", "tests/unit/c.py::t1", "tests/unit/b.py::t2", "tests/unit/b.py::t3",
             f"{listed}::t2", "tests/unit/c.py::t2"]
    items = [SimpleNamespace(nodeid=name) for name in names]
    schedule.longest_first(items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [
        f"{listed}::t1", f"{listed}::t2",  # listed: its measured time
        "tests/unit/b.py::t1", "tests/unit/b.py::t2", "tests/unit/b.py::t3",  # three tests
        "tests/unit/a.py::t1", "tests/unit/a.py::t2",  # two, and before c.py
        "tests/unit/c.py::t1", "tests/unit/c.py::t2"]
