"""One import path for every exception a user catches or raises.

Every class of the tree (defined in ``a2a_flask/protocol/errors.py``) is
importable from :mod:`a2a_flask.errors`, and :mod:`a2a_flask` and
:mod:`a2a_flask.client` export the very same names; the errors of the store and
of signatures are in it and are still what their callers caught before.
"""
from __future__ import annotations

import inspect
from typing import Dict, List, Set, Type

import pytest

import a2a_flask
import a2a_flask.client
import a2a_flask.errors as errors
import a2a_flask.protocol.errors as protocol_errors
import a2a_flask.signing as signing
import a2a_flask.stores as stores
import a2a_flask.stores.base as stores_base

#: What users look for, by kind: each name must be exported by every public module.
LOOKED_FOR: Dict[str, List[str]] = {
    "protocol": ["A2AError", "JSONParseError", "InvalidRequestError", "MethodNotFoundError",
                 "InvalidParamsError", "InternalError", "TaskNotFoundError",
                 "TaskNotCancelableError", "PushNotificationNotSupportedError",
                 "UnsupportedOperationError", "ContentTypeNotSupportedError",
                 "InvalidAgentResponseError", "ExtendedAgentCardNotConfiguredError",
                 "ExtensionSupportRequiredError", "VersionNotSupportedError",
                 "TaskTooLargeError", "PayloadTooLargeError", "RequestTimeoutError"],
    "auth": ["UnauthenticatedError", "PermissionDeniedError", "ResourceExhaustedError"],
    "transport": ["A2ATransportError", "A2AConnectionError", "A2ATimeoutError", "A2AHTTPError",
                  "NoAgentError", "A2AResponseError"],
    "store": ["StoreError", "StoreUnavailable"],
    "signature": ["SignatureError", "CardSignatureError", "PushSignatureError",
                  "CardVerificationError"],
}

PUBLIC = [a2a_flask, errors, a2a_flask.client]


def tree() -> Set[Type[BaseException]]:
    """Every exception class defined in the lowest layer, where the tree lives."""
    return {value for value in vars(protocol_errors).values()
            if inspect.isclass(value) and issubclass(value, BaseException)
            and value.__module__ == protocol_errors.__name__}


def exported_errors(module: object) -> Set[str]:
    """The exception classes ``module`` exports (TaskCancelled, a BaseException on
    purpose, is a signal to executors rather than an error: see the next test)."""
    return {name for name in getattr(module, "__all__")
            if inspect.isclass(getattr(module, name))
            and issubclass(getattr(module, name), Exception)}


def test_task_cancelled_stays_out_of_the_tree_so_except_exception_misses_it():
    assert not issubclass(a2a_flask.TaskCancelled, Exception)
    assert "TaskCancelled" not in errors.__all__


def test_every_class_of_the_tree_is_importable_from_a2a_flask_errors():
    for cls in tree():
        namespace: dict = {}
        exec(f"from a2a_flask.errors import {cls.__name__} as found", namespace)
        assert namespace["found"] is cls
        assert cls.__name__ in errors.__all__


def test_the_tree_has_one_root():
    for cls in tree():
        assert issubclass(cls, errors.A2AException), cls.__name__


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_each_public_module_exports_the_whole_tree(module):
    assert exported_errors(module) == {cls.__name__ for cls in tree()}
    for name in exported_errors(module):
        assert getattr(module, name) is getattr(protocol_errors, name), name


@pytest.mark.parametrize("kind", sorted(LOOKED_FOR))
@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_the_errors_users_look_for_are_where_they_look(module, kind):
    missing = [name for name in LOOKED_FOR[kind] if name not in module.__all__]
    assert missing == []


def test_store_error_is_what_the_stores_raise():
    assert stores.StoreError is stores_base.StoreError is errors.StoreError
    with pytest.raises(errors.StoreError, match="unknown store URL"):
        stores.open_store("nosuchscheme://x")
    assert not issubclass(errors.StoreError, errors.A2AError)  # never rendered on the wire
    assert not issubclass(errors.StoreUnavailable, errors.StoreError)


def test_signature_errors_are_the_signing_package_s_and_still_value_errors():
    assert signing.CardSignatureError is errors.CardSignatureError
    assert signing.PushSignatureError is errors.PushSignatureError
    for cls in (errors.SignatureError, errors.CardSignatureError, errors.PushSignatureError):
        assert issubclass(cls, ValueError) and issubclass(cls, errors.A2AException)
        assert not issubclass(cls, errors.A2AError)
    assert issubclass(errors.CardSignatureError, errors.SignatureError)
    assert issubclass(errors.PushSignatureError, errors.SignatureError)


def test_a_card_that_does_not_verify_raises_every_name_it_was_caught_by():
    pytest.importorskip("cryptography")
    from a2a_flask.signing.cards import verify_card

    for caught in (errors.CardSignatureError, errors.SignatureError, ValueError,
                   errors.A2AException):
        with pytest.raises(caught, match="no signatures"):
            verify_card({"name": "unsigned"}, {"keys": []})


@pytest.mark.parametrize("token", ["a.b", "!!.e30.c2ln", "e30.e30.c2ln"],
                         ids=["not-three-parts", "bad-base64", "no-algorithm"])
def test_a_push_token_that_does_not_verify_is_a_push_signature_error(token):
    """Also when the JWS layer underneath finds the fault (an encoding, the keys)."""
    pytest.importorskip("cryptography")
    from a2a_flask.signing.pushes import verify_push

    with pytest.raises(errors.PushSignatureError) as caught:
        verify_push(b"{}", token, {"keys": []})
    assert isinstance(caught.value, ValueError) and str(caught.value)
    assert caught.value.message == str(caught.value)
