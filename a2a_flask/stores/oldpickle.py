"""Reading the pickles of the earlier shelve format without trusting them.

Stores of releases before the record log (:mod:`.shelve`) kept each task,
event and webhook as a pickle in a ``dbm.dumb`` shelf.  Unpickling runs
whatever callable a pickle names, so a file that is not what it claims (a
backup someone handed over, a copied directory) could run a command.  These
pickles are read by :class:`RecordUnpickler`, which resolves only the names
in :data:`ALLOWED`: a2a_flask's own record classes, and the few builtins a
pickle of them may name.  Any other name stops the read with a
:class:`~.base.StoreError` naming the file, before anything is called.
"""
from __future__ import annotations

import io
import pickle
from typing import Any, FrozenSet, Tuple

from .base import StoreError

#: Every (module, name) a pickle of the earlier format may name: the classes its
#: records were made of (a task record, a webhook, a task and its events, with
#: their parts), and the two builtin types protocol 3 names (that format wrote
#: protocol 4, which names no builtin for plain values).
ALLOWED: FrozenSet[Tuple[str, str]] = frozenset([
    ("a2a_flask.stores.base", "TaskRecord"),
    ("a2a_flask.stores.base", "PushTarget"),
    ("a2a_flask.protocol.models", "Task"),
    ("a2a_flask.protocol.models", "TaskStatus"),
    ("a2a_flask.protocol.models", "TaskState"),
    ("a2a_flask.protocol.models", "Message"),
    ("a2a_flask.protocol.models", "Role"),
    ("a2a_flask.protocol.models", "Part"),
    ("a2a_flask.protocol.models", "PartList"),
    ("a2a_flask.protocol.models", "UNSET"),
    ("a2a_flask.protocol.models", "Artifact"),
    ("a2a_flask.protocol.models", "TaskStatusUpdateEvent"),
    ("a2a_flask.protocol.models", "TaskArtifactUpdateEvent"),
    ("a2a_flask.protocol.models", "TaskPushNotificationConfig"),
    ("a2a_flask.protocol.models", "AuthenticationInfo"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
])


class RecordUnpickler(pickle.Unpickler):
    """An unpickler that resolves only :data:`ALLOWED` names (``where`` names the
    file in the error for any other)."""

    def __init__(self, data: bytes, where: str) -> None:
        super().__init__(io.BytesIO(data))
        self.where = where

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED:
            return super().find_class(module, name)
        raise StoreError(
            f"{self.where} holds a pickle naming {module!r}.{name!r}, which is not one of "
            "a2a_flask's record classes: refused, nothing in it was run (a store of the "
            "earlier shelve format is read only through a2a_flask's own classes)")


def load_record(data: bytes, where: str) -> Any:
    """The value a pickle of the earlier format holds, read by :class:`RecordUnpickler`.

    :raises StoreError: naming ``where`` for a name outside :data:`ALLOWED` or a
        pickle that cannot be read.
    """
    try:
        return RecordUnpickler(data, where).load()
    except StoreError:
        raise
    except Exception as exc:  # a torn or foreign pickle: whatever pickle raises
        raise StoreError(f"{where} holds a pickle that cannot be read "
                         f"({type(exc).__name__}: {exc})") from None
