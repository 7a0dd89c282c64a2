"""The example store (examples/dict_store.py) passes the whole store contract suite,
opened through its registered ``dict://`` scheme, as a third party's would."""
from __future__ import annotations

import pytest

from a2a_flask.stores import open_store, store_schemes
from a2a_flask.testing.store_contract import StoreContract

from examples.dict_store import DictStore

pytestmark = pytest.mark.declare(server=["test_the_package_runs_without_pytest",
                                         "TestDictStore.test_process_local_says_whether_other_processes_see_the_tasks"], slow=[
    "TestDictStore.test_list_tasks_keeps_callers_apart_that_differ_in_trailing_spaces"])


class TestDictStore(StoreContract):
    @pytest.fixture
    def store_factory(self):
        return lambda: open_store("dict://")


def test_the_example_registers_its_scheme() -> None:
    assert "dict" in store_schemes()
    assert isinstance(open_store("dict://"), DictStore)


def test_the_package_runs_without_pytest() -> None:
    """Only the contract suite imports pytest: the package and its testing helpers do not."""
    import subprocess
    import sys

    code = ("import sys, a2a_flask, a2a_flask.stores, a2a_flask.testing, examples.dict_store; "
            "assert 'pytest' not in sys.modules, 'pytest imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
