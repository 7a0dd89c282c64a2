"""JSON text: one writer for every body, event and webhook, and models written
straight to text.

:func:`json_text` writes any JSON value compactly (UTF-8 text, no ASCII
escaping), with the C encoder built once.  :func:`encode_text` writes a model
as :func:`~a2a_flask.protocol.codec.encode` would have it, without building
the dicts first: a function per model class, written member by member like
the codec's encoders, joins the members' texts.  For a streamed chunk that is
a third of building the dicts and encoding them (every event of every stream
passes here).  Its answer is a :class:`JSONText`, which the writers put in as
it is.
"""
from __future__ import annotations

import base64
import dataclasses
import enum
import json
import typing
from typing import Any, Callable, Dict, Iterable, Optional, Set

from .codec import ARRAYS, _converter, field_specs, written_if
from .events import STREAM_MEMBERS
from .models import UNSET, Part, PartList

#: One encoder for every body and event (``json.dumps`` with options builds one per call).
#: No circular check: our values are trees built per answer (a cycle in an agent's own
#: metadata still fails, as a RecursionError, which is answered as an internal error).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)

#: How a string is written inside JSON text (the C function ``json.dumps`` uses).
_quote: Callable[[str], str] = json.encoder.encode_basestring


def _c_encoder() -> Optional[Callable[[Any, int], Iterable[str]]]:
    """The C encoder that ``_ENCODER.encode`` would build anew on every call (a quarter
    of its cost for an event), built once; None where the C accelerator is missing."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder: Callable[[Any, int], Iterable[str]] = make(
            None, _ENCODER.default, _quote, None, ":", ",",
            False, False, True)  # no markers, no indent, unsorted, strict keys, NaN allowed
    except TypeError:  # another signature: keep to the public path
        return None
    return encoder


_ONE_SHOT = _c_encoder()


class JSONText(str):
    """JSON already written: the writers put it in as it is, where a plain ``str``
    would be written as a JSON string."""

    __slots__ = ()


def json_text(value: Any) -> str:
    """``value`` as compact JSON text, as ``json.dumps`` with ``separators=(",", ":")``
    and ``ensure_ascii=False`` writes it; a :class:`JSONText` as it is."""
    if type(value) is JSONText:
        return value
    if _ONE_SHOT is not None:
        return "".join(_ONE_SHOT(value, 0))
    return _ENCODER.encode(value)


def encode_text(model: Any) -> JSONText:
    """A model (a dataclass of :mod:`.models`) as JSON text: ``json_text(encode(model))``,
    written directly."""
    return JSONText(_text_encoder(type(model))(model))


#: How the StreamResponse text of each kind of event begins (stores tell a chunk by it).
STREAM_HEADS = {cls: "{" + _quote(member) + ":" for cls, member in STREAM_MEMBERS.items()}


def stream_response_text(event: Any) -> JSONText:
    """An event (a Task, Message, status or artifact update) as a 1.0 StreamResponse
    object, in JSON text: what a 1.0 stream sends, and how stores keep a log."""
    return JSONText(STREAM_HEADS[type(event)] + _text_encoder(type(event))(event) + "}")


# ------------------------------------------------------------ generated code

_TEXT_ENCODERS: Dict[type, Callable[[Any], str]] = {}
#: Models whose text encoder is being written (one that contains itself waits for it).
_WRITING: Set[type] = set()


def _text_encoder(cls: type) -> Callable[[Any], str]:
    found = _TEXT_ENCODERS.get(cls)
    if found is None:
        _WRITING.add(cls)
        try:
            found = _TEXT_ENCODERS[cls] = _compile_text_encoder(cls)
        finally:
            _WRITING.discard(cls)
    return found


def _compile_text_encoder(cls: type) -> Callable[[Any], str]:
    """``encode_model(value)``: the members :func:`codec.encode` keeps (its tests,
    :func:`codec.written_if`, in the same order), each written as ``,"wire":text``."""
    lines = ["def encode_model(value):", "    text = ''"]
    scope: Dict[str, Any] = {}
    for index, spec in enumerate(field_specs(cls)):
        test = written_if(spec, index, scope)
        scope[f"write{index}"] = _writer(spec.type)
        lines += [f"    item = value.{spec.attr}", f"    if {test}:",
                  f"        text += {',' + _quote(spec.wire) + ':'!r} + write{index}(item)"]
    lines.append("    return '{' + text[1:] + '}'")
    # Names and members come from the class, never from input.
    exec("\n".join(lines), scope)
    encoder: Callable[[Any], str] = scope["encode_model"]
    return encoder


def _writer(tp: Any) -> Callable[[Any], str]:
    """How one member of type ``tp`` is written (what the codec keeps as it is goes
    through :func:`json_text`, so the two always agree)."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:  # Optional[X]: the member's test already left None out
        return _writer([arg for arg in typing.get_args(tp) if arg is not type(None)][0])
    if tp is str:
        return _quote
    if tp is bool:
        return _BOOLEANS.__getitem__
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if tp in _WRITING:
            return lambda value: _text_encoder(tp)(value)
        return _text_encoder(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {member: _quote(member.value) for member in tp}.__getitem__
    if tp is bytes:
        return lambda raw: '"' + base64.b64encode(raw).decode("ascii") + '"'
    if origin in ARRAYS:
        if typing.get_args(tp)[0] is Part:
            return _parts_text
        each = _writer(typing.get_args(tp)[0])
        return lambda values: "[" + ",".join([each(value) for value in values]) + "]"
    convert = _converter(tp)
    if convert is None:
        return json_text
    return lambda value: json_text(convert(value))  # dicts of models: rare, never hot


_BOOLEANS = {True: "true", False: "false"}


def _part_text(part: Part) -> str:
    """What :func:`codec._encode_part` makes, as text."""
    if part.text is not None:
        text = ',"text":' + _quote(part.text)
    elif part.raw is not None:
        text = ',"raw":"' + base64.b64encode(part.raw).decode("ascii") + '"'
    elif part.url is not None:
        text = ',"url":' + _quote(part.url)
    elif part.data is not UNSET:
        text = ',"data":' + json_text(part.data)
    else:
        text = ""
    if part.media_type:
        text += ',"mediaType":' + _quote(part.media_type)
    if part.filename:
        text += ',"filename":' + _quote(part.filename)
    if part.metadata is not None:
        text += ',"metadata":' + json_text(part.metadata)
    return "{" + text[1:] + "}"


_TEXT_ENCODERS[Part] = _part_text


def _parts_text(parts: Iterable[Part]) -> str:
    """A list of parts as text; a :class:`PartList`'s plain text parts straight from
    their text (a long stream's snapshot holds one per chunk)."""
    if type(parts) is PartList:
        texts = [('{"text":' + _quote(item) + "}") if isinstance(item, str) else _part_text(item)
                 for item in parts.compacted()]
    else:
        texts = [_part_text(part) for part in parts]
    return "[" + ",".join(texts) + "]"


__all__ = ["JSONText", "json_text", "encode_text", "stream_response_text", "STREAM_HEADS"]
