"""One error tree: the class the server raises is the class the client
raises, a received error carries what the wire said, and the modules that name
the tree export exactly their names (the 0.1 paths with a DeprecationWarning)."""
from __future__ import annotations

import importlib
import inspect
import warnings

import pytest
import requests
from flask import Flask, Response

import a2a_flask
import a2a_flask.errors as errors
from a2a_flask import A2A, TaskNotFoundError
from a2a_flask.client import A2AClient
from a2a_flask.client.errors import from_jsonrpc
from a2a_flask.protocol import errors as protocol_errors
from a2a_flask.testing import A2ATestClient, FlaskAdapter

from tests.support.client_support import client_agent_server
from tests.conftest import echo, make_card

pytestmark = [pytest.mark.timeout(60), pytest.mark.declare(server=[
    "test_one_except_catches_what_the_client_raises_over_the_network"])]

BINDINGS = ["jsonrpc", "rest"]

#: The protocol errors a2a_flask's server can send, and the class the client raises
#: for each: its own, but for the two the engine keeps as its own signals, the
#: media-type error that shares its reason with its parent, and the root.
RECEIVED_AS = {
    **{cls: cls for cls in vars(errors).values()
       if inspect.isclass(cls) and issubclass(cls, errors.A2AError)},
    errors.TaskTooLargeError: errors.InvalidParamsError,
    errors.StoreUnavailable: errors.InternalError,
    errors.UnsupportedMediaTypeError: errors.ContentTypeNotSupportedError,
}
RECEIVED_AS[errors.A2AError] = errors.InternalError  # the root's standard meaning
for not_sent in (errors.StreamingNotSupportedError, errors.InvalidTaskStateError,
                 errors.ResourceUnavailableError,  # a2a_flask speaks the 1.0 meanings only
                 errors.A2AResponseError):  # the client's, for an answer it cannot read
    del RECEIVED_AS[not_sent]


def refusing_app(error: Exception) -> Flask:
    """An agent whose authenticator raises ``error`` for every call."""
    a2a = A2A(card=make_card(), executor=echo)

    @a2a.authenticate
    def refuse():
        raise error

    app = Flask("refusing")
    a2a.init_app(app)
    return app


# ------------------------------------------------------------------ one class, both sides


@pytest.mark.parametrize("binding", BINDINGS)
def test_one_except_catches_the_server_s_error_and_the_test_client_s(binding):
    raised = TaskNotFoundError("no such task here", metadata={"taskId": "t-1"})
    try:
        raise raised  # what an authenticator (the server side) raises...
    except a2a_flask.TaskNotFoundError as caught:
        assert caught is raised
    app = refusing_app(raised)
    with A2ATestClient(app, binding=binding) as agent:
        try:  # ...and what the test client raises on receiving it: one except
            agent.get_task("t-1")
        except a2a_flask.TaskNotFoundError as caught:
            assert type(caught) is TaskNotFoundError and caught is not raised
            assert caught.message == "no such task here"
        else:
            pytest.fail("no error raised")


@pytest.mark.parametrize("prefer", ["jsonrpc@1.0", "rest", "jsonrpc@0.3", "jsonrpc@0.1"])
def test_one_except_catches_what_the_client_raises_over_the_network(prefer):
    with A2AClient.connect(client_agent_server().url, prefer=prefer) as agent:
        with pytest.raises(a2a_flask.TaskNotFoundError) as caught:
            agent.get_task("no-such-task")
    assert type(caught.value) is errors.TaskNotFoundError
    assert isinstance(caught.value, errors.A2AError) and caught.value.response is not None


def test_the_client_s_names_are_the_tree_s_classes():
    import a2a_flask.client as client

    for name in client.__all__:
        value = getattr(client, name)
        if inspect.isclass(value) and issubclass(value, BaseException):
            assert value is getattr(errors, name), name
    for name in a2a_flask.__all__:
        value = getattr(a2a_flask, name)
        if inspect.isclass(value) and issubclass(value, errors.A2AException):
            assert value is getattr(errors, name), name


# ------------------------------------------------------------------ what a received error carries


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("sent", sorted(RECEIVED_AS, key=lambda cls: cls.__name__),
                         ids=lambda cls: cls.__name__)
def test_every_error_the_server_sends_comes_back_as_its_class_with_what_the_wire_said(
        sent, binding):
    app = refusing_app(sent("the words", metadata={"taskId": "t-9"},
                            violations=[("message.parts", "is empty")]))
    with A2ATestClient(app, binding=binding) as agent:
        with pytest.raises(errors.A2AError) as caught:
            agent.get_task("t-9")
    got = caught.value
    assert type(got) is RECEIVED_AS[sent]
    assert got.message == "the words" and str(got) == "the words"
    assert got.reason == sent.reason and got.code == sent.code
    assert got.metadata == {"taskId": "t-9"}
    assert got.violations == [("message.parts", "is empty")]
    assert got.field_violations == [{"field": "message.parts", "description": "is empty"}]
    assert got.data == sent("x", metadata={"taskId": "t-9"},
                            violations=[("message.parts", "is empty")]).details()
    wire = got.response.json()
    if binding == "rest":
        assert got.status_code == sent.http_status and got.error == wire["error"]
    else:
        assert got.status_code == sent.jsonrpc_http_status and got.error == wire["error"]
        assert wire["error"]["code"] == sent.code


def test_the_client_keeps_the_code_the_agent_sent_and_the_class_s_reason_when_none():
    """A 0.1 agent's -32007 is UnauthenticatedError, with the code as sent; it sent no
    ErrorInfo, so the reason is the class's."""
    response = requests.Response()
    response.status_code = 200
    got = from_jsonrpc({"code": -32007, "message": "who are you"}, "0.1", response)
    assert type(got) is errors.UnauthenticatedError
    assert got.code == -32007 and errors.UnauthenticatedError.code == -32040
    assert got.reason == "UNAUTHENTICATED" and got.data is None and got.metadata == {}
    assert got.status_code == 200 and got.error == {"code": -32007, "message": "who are you"}


def test_errors_raised_here_carry_no_wire():
    error = errors.TaskNotFoundError()
    assert error.message == "Task not found" and error.code == -32001
    assert error.response is None and error.error is None and error.data is None
    assert error.status_code is None


# ------------------------------------------------------------------ failures of the exchange


def plain_client(*routes: tuple) -> A2AClient:
    """A client of ``/rpc`` on a Flask app that is no agent (in-process)."""
    app = Flask("not-an-agent")
    for rule, view in routes:
        app.add_url_rule(rule, view_func=view, methods=["POST"])
    session = requests.Session()
    session.mount("http://", FlaskAdapter(app))
    return A2AClient("http://localhost/rpc", session=session, max_reconnects=0)


def test_transport_failures_are_client_only_classes_beside_the_protocol_errors():
    for cls in (errors.A2AConnectionError, errors.A2ATimeoutError, errors.A2AHTTPError,
                errors.NoAgentError):
        assert issubclass(cls, errors.A2ATransportError) and not issubclass(cls, errors.A2AError)
    assert issubclass(errors.A2AResponseError, errors.A2ATransportError)
    assert issubclass(errors.A2AResponseError, errors.InvalidAgentResponseError)
    assert not issubclass(errors.CardVerificationError, errors.A2AError)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.A2AException), name


def test_an_answer_that_is_not_a2a_is_a_response_error():
    client = plain_client(("/rpc", lambda: Response("<html>hi</html>", mimetype="text/html")))
    with pytest.raises(errors.A2AResponseError, match="not JSON") as caught:
        client.get_task("t")
    assert isinstance(caught.value, errors.InvalidAgentResponseError)
    assert caught.value.status_code == 200


def test_an_http_failure_without_an_a2a_body_is_an_http_error():
    client = plain_client(("/rpc", lambda: Response("<html>bad gateway</html>", status=502,
                                                     mimetype="text/html")))
    with pytest.raises(errors.A2AHTTPError, match="bad gateway") as caught:
        client.get_task("t")
    assert caught.value.status_code == 502 and not isinstance(caught.value, errors.A2AError)


def test_a_bare_401_is_the_protocol_s_unauthenticated_error():
    client = plain_client(("/rpc", lambda: Response("no", status=401, mimetype="text/plain")))
    with pytest.raises(a2a_flask.errors.UnauthenticatedError) as caught:
        client.get_task("t")
    assert caught.value.status_code == 401 and caught.value.error is None


# ------------------------------------------------------------------ the public module


def test_a2a_flask_errors_names_the_whole_tree_and_nothing_else():
    defined = {name for name, value in vars(protocol_errors).items()
               if inspect.isclass(value) and issubclass(value, BaseException)}
    assert set(errors.__all__) == defined
    assert len(errors.__all__) == len(set(errors.__all__))
    namespace: dict = {}
    exec("from a2a_flask.errors import *", namespace)
    assert {n for n in namespace if not n.startswith("__")} == set(errors.__all__)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in errors.__all__:
            getattr(errors, name)


def test_the_top_level_names_are_unchanged():
    assert a2a_flask.__all__ == [
        "A2A", "TaskContext", "APIKeyAuth", "BearerAuth", "Principal", "TaskCancelled",
        "AgentCapabilities", "AgentCard", "AgentExtension", "AgentInterface", "AgentProvider",
        "AgentSkill", "Artifact", "AuthenticationInfo", "Message", "Part", "PartList", "Role",
        "Task", "TaskArtifactUpdateEvent", "TaskPushNotificationConfig", "TaskState",
        "TaskStatus", "TaskStatusUpdateEvent", "TaskStore", "MemoryStore", "ShelveStore",
        "open_store", *errors.__all__]
    # Every error exported before the whole tree was still is.
    assert {"A2AError", "ContentTypeNotSupportedError", "ExtendedAgentCardNotConfiguredError",
            "ExtensionSupportRequiredError", "InternalError", "InvalidAgentResponseError",
            "InvalidParamsError", "InvalidRequestError", "JSONParseError",
            "MethodNotFoundError", "PushNotificationNotSupportedError", "StoreUnavailable",
            "TaskNotCancelableError", "TaskNotFoundError", "TaskTooLargeError",
            "UnsupportedOperationError", "VersionNotSupportedError"} <= set(a2a_flask.__all__)


# ------------------------------------------------------------------ deprecated paths


#: module -> (its names, where they live now): the 0.1 paths, each exporting its own names.
COMPAT = {
    "a2a_flask.models": ("a2a_flask.protocol.models", [
        "REQUIRED", "ALWAYS", "UNSET", "new_id", "utc_now", "format_timestamp",
        "parse_timestamp", "TaskState", "TERMINAL_STATES", "INTERRUPTED_STATES",
        "SETTLED_STATES", "Role", "Part", "PartList", "Message", "TaskStatus", "Artifact", "Task",
        "TaskStatusUpdateEvent", "TaskArtifactUpdateEvent", "AuthenticationInfo",
        "TaskPushNotificationConfig", "AgentProvider", "AgentExtension", "AgentCapabilities",
        "AgentInterface", "StringList", "SecurityRequirement", "AgentSkill",
        "AgentCardSignature", "AgentCard", "SendMessageConfiguration", "SendMessageRequest",
        "GetTaskRequest", "ListTasksRequest", "ListTasksResponse", "CancelTaskRequest",
        "SubscribeToTaskRequest", "TaskPushConfigRequest",
        "ListTaskPushNotificationConfigsRequest", "ListTaskPushNotificationConfigsResponse",
        "GetExtendedAgentCardRequest", "Empty"]),
    "a2a_flask.auth": ("a2a_flask.web.auth", [
        "APIKeyAuth", "Authenticator", "BearerAuth", "Principal", "Authentication",
        "PermissionDeniedError", "UnauthenticatedError"]),
    "a2a_flask.card_signing": ("a2a_flask.signing.cards", [
        "CardSignatureError", "CardSigner", "canonical_json", "signing_payload", "verify_card"]),
    "a2a_flask.push.signing": ("a2a_flask.signing.pushes", [
        "BODY_HASH_CLAIM", "PushSignatureError", "PushSigner", "body_sha256", "jwk_thumbprint",
        "verify_push"]),
}


@pytest.mark.parametrize("module_name", sorted(COMPAT))
def test_each_compatibility_module_exports_exactly_its_names(module_name):
    home_name, names = COMPAT[module_name]
    module = importlib.import_module(module_name)
    assert sorted(module.__all__) == sorted(names)
    assert sorted(dir(module)) == sorted(names)
    assert not [n for n in vars(module) if not n.startswith("_")]  # all served with a warning
    for stray in ("os", "time", "annotations", "Any", "dataclass"):
        with pytest.raises(AttributeError):
            getattr(module, stray)
    namespace: dict = {}
    with pytest.warns(DeprecationWarning):
        exec(f"from {module_name} import *", namespace)
    assert {n for n in namespace if not n.startswith("__")} == set(names)


@pytest.mark.parametrize("module_name", sorted(COMPAT))
def test_each_compatibility_name_warns_and_is_the_moved_object(module_name):
    home_name, names = COMPAT[module_name]
    module, home = importlib.import_module(module_name), importlib.import_module(home_name)
    for name in names:
        with pytest.warns(DeprecationWarning, match=rf"{module_name}\.{name} is deprecated; "
                                                    rf"use {home_name}\.{name}$") as caught:
            value = getattr(module, name)
        assert value is getattr(home, name)
        assert caught[0].filename == __file__  # the warning points at the caller


@pytest.mark.parametrize("name", ["ERROR_DOMAIN", "ERROR_INFO_TYPE", "BAD_REQUEST_TYPE",
                                  "FieldViolation"])
def test_the_0_1_constants_of_a2a_flask_errors_warn(name):
    with pytest.warns(DeprecationWarning, match=f"use a2a_flask.protocol.errors.{name}"):
        assert getattr(errors, name) is getattr(protocol_errors, name)


RENAMED = {
    "A2AClientError": errors.A2AException,
    "A2AProtocolError": errors.A2AError,
    "AuthenticationRequiredError": errors.UnauthenticatedError,
    "AuthorizationFailedError": errors.PermissionDeniedError,
    "RateLimitExceededError": errors.ResourceExhaustedError,
}


@pytest.mark.parametrize("module_name", ["a2a_flask.client", "a2a_flask.client.errors"])
@pytest.mark.parametrize("old", sorted(RENAMED))
def test_the_client_s_renamed_errors_are_deprecated_aliases(module_name, old):
    with pytest.warns(DeprecationWarning, match=rf"{module_name}\.{old} is deprecated; "
                                                rf"use a2a_flask\.errors\.{RENAMED[old].__name__}"):
        exec(f"from {module_name} import {old} as found", namespace := {})
    assert namespace["found"] is RENAMED[old]
    assert old not in importlib.import_module(module_name).__all__


def test_old_client_code_still_catches_what_it_did():
    """``except A2AClientError`` caught any client failure; ``except A2AProtocolError``
    any error the agent answered, and not a broken connection."""
    with pytest.warns(DeprecationWarning):
        from a2a_flask.client import A2AClientError, A2AProtocolError
    app = refusing_app(errors.PermissionDeniedError("not you"))
    with A2ATestClient(app) as agent:
        with pytest.raises(A2AProtocolError):
            agent.get_task("t")
        with pytest.raises(A2AClientError):
            agent.get_task("t")
    assert issubclass(errors.A2AConnectionError, A2AClientError)
    assert not issubclass(errors.A2AConnectionError, A2AProtocolError)
