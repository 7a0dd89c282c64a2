"""What a keyed send writes to its store (issue 49): its acceptance (the key, the task
and its lease: ``create_claimed``, one write) and its run's last write, nothing more;
a retry writes nothing.  The store contract checks that ``create_claimed`` is atomic."""
from __future__ import annotations

from typing import Any, Callable, List

import pytest

from a2a_flask.stores.memory import MemoryStore

from tests.support import wire
from tests.support.tasks import message

#: The contract's methods that write.
WRITES = ("create", "create_with", "create_claimed", "append", "append_released",
          "claim_once", "claim", "release_claim", "acquire_lease", "release_lease")


class CountingStore(MemoryStore):
    """The memory store, noting each write the engine asks of it (not the calls a
    default method makes of the store in its turn)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: List[str] = []
        self.depth = 0


def _counted(name: str) -> Callable[..., Any]:
    method = getattr(MemoryStore, name)

    def counted(self: CountingStore, *args: Any, **kwargs: Any) -> Any:
        if not self.depth:
            self.writes.append(name)
        self.depth += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self.depth -= 1

    return counted


for _name in WRITES:
    setattr(CountingStore, _name, _counted(_name))


def done(ctx: Any) -> None:
    ctx.complete("done")


@pytest.fixture
def store(make_app):
    store = CountingStore()
    store.app = make_app(done, store=store)
    return store


def test_a_keyed_short_send_writes_twice_and_its_retry_not_at_all(store):
    sent = message("hi")
    first = wire.rpc(store.app, "SendMessage", {"message": sent},
                     headers={"Idempotency-Key": "k-1"})["result"]
    assert first["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert store.writes == ["create_claimed", "append_released"]
    store.writes.clear()
    again = wire.rpc(store.app, "SendMessage", {"message": sent},
                     headers={"Idempotency-Key": "k-1"})["result"]
    assert again["task"]["id"] == first["task"]["id"]
    assert store.writes == ["create_claimed"]  # which found the key bound: nothing written


def test_an_unkeyed_short_send_still_writes_once(store):
    wire.rpc(store.app, "SendMessage", {"message": message("hi")})
    assert store.writes == ["create_with"]
