"""The JSON writer: what ``json.dumps`` writes, and models written straight to text
exactly as their dicts would be written."""
from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a_flask.protocol import jsontext
from a2a_flask.protocol import models as m
from a2a_flask.protocol.codec import encode
from a2a_flask.protocol.jsontext import JSONText, encode_text, json_text
from a2a_flask.web.jsonrpc import result_body
from a2a_flask.web.sse import dumps, dumps_line, frame

from tests.support.fuzzkit import fuzz
from tests.support.model_strategies import models

JSON_VALUES = [
    {"jsonrpc": "2.0", "id": 7, "result": {"artifactUpdate": {"append": True, "parts": [
        {"text": "chunk 1 \u00e9\u2028"}], "lastChunk": False}}},
    ["a", 1, -2.5, 1e300, None, True, False, {"": {}}, []],
    "plain text", 3, 0.1, None, float("inf"), {"\ud800": "\udfff"},
]


@pytest.mark.parametrize("value", JSON_VALUES)
@pytest.mark.parametrize("cached", [True, False])
def test_json_text_is_what_json_dumps_writes(value, cached, monkeypatch):
    """The encoder built once (or, without the C accelerator, the public one) writes
    exactly what the standard library's compact, non-ASCII json.dumps does."""
    if not cached:
        monkeypatch.setattr(jsontext, "_ONE_SHOT", None)
    assert json_text(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_json_text_refuses_what_json_dumps_refuses():
    with pytest.raises(TypeError):
        json_text({"when": object()})
    looped: dict = {}
    looped["self"] = looped
    with pytest.raises(RecursionError):  # answered as an internal error by the bindings
        json_text(looped)


#: Every model of the protocol (requests, answers, events, cards).
MODELS = [value for value in vars(m).values()
          if isinstance(value, type) and dataclasses.is_dataclass(value)
          and value.__module__ == m.__name__]


@pytest.mark.parametrize("cls", MODELS, ids=lambda cls: cls.__name__)
def test_a_model_written_as_text_is_its_dicts_written(cls):
    @fuzz(0.5)
    @given(models(cls))
    def check(model):
        assert encode_text(model) == json_text(encode(model))

    check()


def test_the_models_text_is_json_text_and_every_writer_takes_it_as_it_is():
    event = m.TaskArtifactUpdateEvent("t", "c", m.Artifact("a", [m.Part(text="x\u2028")]),
                                      append=True)
    written = encode_text(event)
    assert type(written) is JSONText and json_text(written) is written
    assert dumps(written) == json.dumps(encode(event), separators=(",", ":"),
                                        ensure_ascii=False).encode()
    assert dumps_line(written) == written.replace("\u2028", "\\u2028")
    assert frame(written, 3) == frame(encode(event), 3)
    assert dumps(result_body(7, written)) == dumps(result_body(7, encode(event)))
    assert dumps(result_body("a\"b", written)) == dumps(result_body("a\"b", encode(event)))


@fuzz()
@given(st.lists(models(m.Part), max_size=3))
def test_parts_in_any_form_are_written_as_the_codec_writes_them(parts):
    artifact = m.Artifact("a", parts)
    assert encode_text(artifact) == json_text(encode(artifact))
