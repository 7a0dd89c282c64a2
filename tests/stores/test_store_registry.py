"""register_store: the URL schemes open_store knows, built in and added."""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from a2a_flask.stores import (MemoryStore, StoreError, TaskStore, open_store, register_store,
                              store_schemes)
from a2a_flask.stores import _SCHEMES

pytestmark = pytest.mark.declare(slow=["test_the_built_in_schemes_are_registered"])


@pytest.fixture
def scratch_schemes() -> Iterator[None]:
    """Schemes a test registers are gone after it (the registry is process-wide)."""
    before = dict(_SCHEMES)
    yield
    _SCHEMES.clear()
    _SCHEMES.update(before)


def test_the_built_in_schemes_are_registered() -> None:
    assert {"memory", "shelve", "sqlite", "redis", "rediss", "unix", "postgresql", "postgres",
            "mysql", "mariadb"} <= set(store_schemes())
    assert isinstance(open_store("memory://"), MemoryStore)


def test_a_registered_scheme_opens_with_its_factory(scratch_schemes: None) -> None:
    seen: dict = {}

    def factory(url: str, **options: Any) -> TaskStore:
        seen.update(options, url=url)
        return MemoryStore()

    register_store("mine", factory)
    store = open_store("mine://somewhere?x=1", task_ttl=7.0)
    assert isinstance(store, MemoryStore)
    assert seen["url"] == "mine://somewhere?x=1" and seen["task_ttl"] == 7.0
    assert seen["limits"].timeout == 5.0
    assert "mine" in store_schemes()


def test_a_driver_suffix_falls_back_to_the_base_scheme(scratch_schemes: None) -> None:
    register_store("mine", lambda url, **_: MemoryStore())
    assert isinstance(open_store("mine+fast://x"), MemoryStore)


def test_an_unknown_scheme_names_the_known_ones(scratch_schemes: None) -> None:
    register_store("mine", lambda url, **_: MemoryStore())
    with pytest.raises(StoreError) as info:
        open_store("bogus://x")
    message = str(info.value)
    assert "unknown store URL 'bogus://x'" in message
    assert "memory://" in message and "mine://" in message and "sqlite://" in message
    assert "register_store" in message


def test_an_unknown_scheme_masks_the_password() -> None:
    with pytest.raises(StoreError) as info:
        open_store("bogus://user:secret@host/db")
    assert "secret" not in str(info.value)


def test_registering_a_scheme_twice_is_an_error(scratch_schemes: None) -> None:
    register_store("mine", lambda url, **_: MemoryStore())
    with pytest.raises(StoreError, match="'mine' is registered already"):
        register_store("mine", lambda url, **_: MemoryStore())
    with pytest.raises(StoreError, match="'sqlite' is registered already"):
        register_store("sqlite", lambda url, **_: MemoryStore())


@pytest.mark.parametrize("scheme", ["", "Dict", "1db", "my store", "dict://", None])
def test_a_scheme_must_be_a_url_scheme(scratch_schemes: None, scheme: Any) -> None:
    with pytest.raises(StoreError, match="lower-case URL scheme"):
        register_store(scheme, lambda url, **_: MemoryStore())


def test_a_factory_must_be_callable(scratch_schemes: None) -> None:
    with pytest.raises(StoreError, match="not callable"):
        register_store("mine", "not a function")  # type: ignore[arg-type]
