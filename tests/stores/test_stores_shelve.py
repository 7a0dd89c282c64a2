"""The store contract and the cases of tests/support/store_cases.py on the shelve store
(one module per store: under ``--dist loadfile`` the stores run side by side)."""
from __future__ import annotations

import pytest

from tests.support.store_cases import (  # noqa: F401
    TestStoreContract,
    _drop_store_names,
    kind_fixture,
    store,
    test_a_read_slice_is_decoded_entry_by_entry,
    test_chunks_are_appended_without_rewriting_the_snapshot_each_time,
    test_file_store_persists_across_reopening,
    test_read_slices_end_where_each_store_keeps_its_records,
    test_stores_of_json_text_hand_out_the_text,
    test_two_instances_on_one_path_see_each_other,
    test_two_processes_appending_to_one_file_keep_a_dense_sequence,
    test_wait_notices_an_append_from_another_process,
)

pytestmark = [pytest.mark.slow, pytest.mark.declare(server=[
    "TestStoreContract.test_process_local_says_whether_other_processes_see_the_tasks",
    "test_two_processes_appending_to_one_file_keep_a_dense_sequence",
    "test_wait_notices_an_append_from_another_process"])]

kind = kind_fixture("shelve")
