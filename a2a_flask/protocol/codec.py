"""ProtoJSON for the dataclasses in :mod:`a2a_flask.protocol.models`.

``encode`` turns a model into plain JSON values (camelCase members, enum names,
base64 bytes, defaults left out).  ``decode`` does the reverse, accepting
camelCase or snake_case member names, ignoring unknown members, treating JSON
``null`` as unset, and collecting every problem as a field violation so that
one :class:`~a2a_flask.errors.InvalidParamsError` names them all.
"""
from __future__ import annotations

import base64
import binascii
import collections.abc
import dataclasses
import enum
import typing
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Type, TypeVar

from .errors import FieldViolation, InvalidParamsError
from .models import UNSET, Part, PartList

T = TypeVar("T")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


class _FieldSpec(typing.NamedTuple):
    attr: str
    wire: str
    type: Any
    presence: bool  # default None: emit whenever set
    always: bool
    required: bool


_SPECS: Dict[type, Tuple[_FieldSpec, ...]] = {}


def field_specs(cls: type) -> Tuple[_FieldSpec, ...]:
    specs = _SPECS.get(cls)
    if specs is None:
        hints = typing.get_type_hints(cls)
        specs = tuple(
            _FieldSpec(
                f.name,
                camel(f.name),
                hints[f.name],
                f.default is None,
                bool(f.metadata.get("always")),
                bool(f.metadata.get("required")),
            )
            for f in dataclasses.fields(cls)
            if not f.metadata.get("draft")  # a draft's member: its dialect's own business
        )
        _SPECS[cls] = specs
    return specs


# ------------------------------------------------------------------ encode


#: What ``typing.get_origin`` gives for the array members of the models: ``List``,
#: or ``MutableSequence`` where a member may hold a :class:`~.models.PartList`.
ARRAYS = (list, collections.abc.MutableSequence)


def encode(value: Any) -> Any:
    """A model (or list/dict of models) as JSON-ready Python values."""
    encoder = _ENCODERS.get(type(value))
    if encoder is None and dataclasses.is_dataclass(value):
        encoder = _encoder_for(type(value))
    if encoder is not None:
        return encoder(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


# Encoders are compiled once per model class from its type hints: the hot path
# (every response and stream event) then runs no isinstance chains.
Converter = Optional[Callable[[Any], Any]]
_ENCODERS: Dict[type, Callable[[Any], Dict[str, Any]]] = {}


def _converter(tp: Any) -> Converter:
    """How to encode one member of type ``tp``; None means "as it is"."""
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        return _converter([a for a in typing.get_args(tp) if a is not type(None)][0])
    if origin in ARRAYS:
        if typing.get_args(tp)[0] is Part:
            return _encode_parts
        each = _converter(typing.get_args(tp)[0])
        if each is None:
            return None
        return lambda values: [each(v) for v in values]
    if origin in (dict, Dict):
        each_value = _converter(typing.get_args(tp)[1])
        if each_value is None:
            return None
        return lambda values: {k: each_value(v) for k, v in values.items()}
    if tp is Part:
        return _encode_part
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return lambda value: _encoder_for(tp)(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return lambda member: member.value
    if tp is bytes:
        return lambda raw: base64.b64encode(raw).decode("ascii")
    return None


def _enum_default(tp: Any) -> Any:
    """The ``*_UNSPECIFIED`` member (enum value 0) of an enum type, which ProtoJSON omits."""
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next((m for m in tp if _is_unspecified(m)), None)
    return None


def _encoder_for(cls: type) -> Callable[[Any], Dict[str, Any]]:
    encoder = _ENCODERS.get(cls)
    if encoder is not None:
        return encoder
    encoder = _compile_encoder(cls)
    _ENCODERS[cls] = encoder
    return encoder


def _compile_encoder(cls: type) -> Callable[[Any], Dict[str, Any]]:
    """A function that encodes ``cls``, written out member by member (a third of the
    cost of looping over a plan of the members: every event and response runs it).

    A member is left out when it is None, or, unless it has presence or must
    always be sent, when it holds a default value (``""``, 0, False, ``[]``,
    ``{}``, the enum's ``*_UNSPECIFIED``).
    """
    lines = ["def encode_model(value):", "    out = {}"]
    scope: Dict[str, Any] = {}
    for index, spec in enumerate(field_specs(cls)):
        convert, test = _converter(spec.type), written_if(spec, index, scope)
        written = "item"
        if convert is not None:
            written = f"convert{index}(item)"
            scope[f"convert{index}"] = convert
        lines += [f"    item = value.{spec.attr}", f"    if {test}:",
                  f"        out[{spec.wire!r}] = {written}"]
    lines.append("    return out")
    exec("\n".join(lines), scope)  # names and members come from the class, not from input
    encoder: Callable[[Any], Dict[str, Any]] = scope["encode_model"]
    return encoder


def written_if(spec: _FieldSpec, index: int, scope: Dict[str, Any]) -> str:
    """The test, on ``item`` (the member's value), under which a generated encoder
    writes member ``index``; a value it compares with goes into ``scope``."""
    if spec.presence or spec.always:
        return "item is not None"
    enum_default = _enum_default(spec.type)
    if enum_default is not None:
        scope[f"default{index}"] = enum_default
        return f"item and item is not default{index}"
    return "item"


def _encode_part(part: Part) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if part.text is not None:
        out["text"] = part.text
    elif part.raw is not None:
        out["raw"] = base64.b64encode(part.raw).decode("ascii")
    elif part.url is not None:
        out["url"] = part.url
    elif part.data is not UNSET:
        out["data"] = part.data
    if part.media_type:
        out["mediaType"] = part.media_type
    if part.filename:
        out["filename"] = part.filename
    if part.metadata is not None:
        out["metadata"] = part.metadata
    return out


_ENCODERS[Part] = _encode_part


def _encode_parts(parts: Iterable[Part]) -> List[Dict[str, Any]]:
    """A list of parts; a :class:`PartList`'s plain text parts straight from their text."""
    if type(parts) is PartList:
        return [{"text": item} if isinstance(item, str) else _encode_part(item)
                for item in parts.compacted()]
    return [_encode_part(part) for part in parts]


# ------------------------------------------------------------------ decode


def decode(cls: Type[T], value: Any, path: str = "") -> T:
    """Build ``cls`` from JSON values or raise InvalidParamsError naming each bad field."""
    errors: List[FieldViolation] = []
    result: T = _decode(cls, value, path, errors)
    if errors:
        raise InvalidParamsError(
            "Invalid parameters: " + "; ".join(f"{f or 'params'}: {d}" for f, d in errors[:5]),
            violations=errors,
        )
    return result


def decode_lenient(cls: Type[T], value: Any) -> Tuple[T, List[FieldViolation]]:
    """Build ``cls`` as far as possible and list every violation instead of raising
    (a client tolerates agents that leave out REQUIRED members)."""
    errors: List[FieldViolation] = []
    return _decode(cls, value, "", errors), errors


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


_TYPE_NAMES = {str: "a string", int: "an integer", bool: "a boolean", float: "a number"}


def _decode(tp: Any, value: Any, path: str, errors: List[FieldViolation]) -> Any:
    return _decoder(tp)(value, path, errors)


# Like the encoders, decoders are built once per type from its hints, so that
# parsing a request runs no typing introspection.
Decoder = Callable[[Any, str, List[FieldViolation]], Any]
_DECODERS: Dict[Any, Decoder] = {}


def _decoder(tp: Any) -> Decoder:
    found = _DECODERS.get(tp)
    if found is None:
        found = _DECODERS[tp] = _build_decoder(tp)
    return found


def _build_decoder(tp: Any) -> Decoder:
    origin = typing.get_origin(tp)
    if origin is typing.Union:  # Optional[X]
        return _decoder([a for a in typing.get_args(tp) if a is not type(None)][0])
    if tp is Any:
        return lambda value, path, errors: value
    if origin in ARRAYS:
        item_tp = typing.get_args(tp)[0]

        def decode_list(value: Any, path: str, errors: List[FieldViolation]) -> Any:
            if not isinstance(value, list):
                errors.append((path, "must be an array"))
                return []
            each = _decoder(item_tp)
            return [each(v, f"{path}[{i}]", errors) for i, v in enumerate(value)]

        return decode_list
    if origin in (dict, Dict):
        val_tp = typing.get_args(tp)[1]

        def decode_dict(value: Any, path: str, errors: List[FieldViolation]) -> Any:
            if not isinstance(value, dict):
                errors.append((path, "must be an object"))
                return {}
            each = _decoder(val_tp)
            return {k: each(v, _join(path, k), errors) for k, v in value.items()}

        return decode_dict
    if tp is Part:
        return _decode_part
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        by_value = {member.value: member for member in tp}
        return lambda value, path, errors: _decode_enum(tp, by_value, value, path, errors)
    if tp is bytes:
        return _decode_bytes
    if tp is int:
        return _decode_int
    if tp is float:
        return _decode_float
    if tp in (str, bool):
        def decode_exact(value: Any, path: str, errors: List[FieldViolation]) -> Any:
            if type(value) is not tp:
                errors.append((path, f"must be {_TYPE_NAMES[tp]}"))
                return tp()
            return value

        return decode_exact
    raise TypeError(f"codec cannot decode {tp!r}")  # a bug in the models, not bad input


def _decode_int(value: Any, path: str, errors: List[FieldViolation]) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str, float)):
        errors.append((path, "must be an integer"))
        return 0
    try:
        number = int(value)
    except (ValueError, OverflowError):
        errors.append((path, "must be an integer"))
        return 0
    if number != value and not isinstance(value, str):
        errors.append((path, "must be an integer"))
    if not -(2**31) <= number < 2**31:
        errors.append((path, "is out of range"))
    return number


def _decode_float(value: Any, path: str, errors: List[FieldViolation]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        errors.append((path, "must be a number"))
        return 0.0
    return float(value)


def _dataclass_decoder(cls: type) -> Decoder:
    # (attribute, wire name, snake_case alias or None, required, member decoder), made
    # on the first call: a model may contain itself, whose decoder is registered by then.
    plan: List[Tuple[str, str, Optional[str], bool, Decoder]] = []

    def decode_dataclass(value: Any, path: str, errors: List[FieldViolation]) -> Any:
        if not isinstance(value, dict):
            errors.append((path, "must be an object"))
            return cls()
        if not plan:
            plan.extend((spec.attr, spec.wire, spec.attr if spec.attr != spec.wire else None,
                         spec.required, _decoder(spec.type)) for spec in field_specs(cls))
        kwargs: Dict[str, Any] = {}
        for attr, wire, alias, required, member in plan:
            raw = value.get(wire)
            if raw is None and alias is not None:
                raw = value.get(alias)
            if raw is None:
                if required:
                    errors.append((_join(path, wire), "is required"))
                continue
            where = _join(path, wire)
            known = len(errors)
            decoded = member(raw, where, errors)
            if required and len(errors) == known and (
                    decoded == "" or decoded == [] or _is_unspecified(decoded)):
                errors.append((where, "must not be empty or unspecified"))
            kwargs[attr] = decoded
        return cls(**kwargs)

    return decode_dataclass


def _is_unspecified(value: Any) -> bool:
    return isinstance(value, enum.Enum) and value.value.endswith("_UNSPECIFIED")


def _decode_enum(cls: Type[enum.Enum], by_value: Dict[str, Any], value: Any, path: str,
                 errors: List[FieldViolation]) -> Any:
    if isinstance(value, str):
        member = by_value.get(value)
        if member is not None:
            return member
    elif isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(by_value):
        return list(cls)[value]  # ProtoJSON also accepts the enum number
    errors.append((path, "must be one of " + ", ".join(by_value)))
    return next(iter(cls))


def _decode_bytes(value: Any, path: str, errors: List[FieldViolation]) -> bytes:
    if not isinstance(value, str):
        errors.append((path, "must be a base64 string"))
        return b""
    try:
        padded = value + "=" * (-len(value) % 4)
        alphabet = b"-_" if "-" in value or "_" in value else None  # URL-safe form
        return base64.b64decode(padded, altchars=alphabet, validate=True)
    except (binascii.Error, ValueError):
        errors.append((path, "must be valid base64"))
        return b""


_CONTENT_MEMBERS = ("text", "raw", "url", "data")


def _decode_part(value: Any, path: str, errors: List[FieldViolation]) -> Part:
    if not isinstance(value, dict):
        errors.append((path, "must be an object"))
        return Part(text="")
    present = [m for m in _CONTENT_MEMBERS if m in value and (m == "data" or value[m] is not None)]
    if len(present) != 1:
        errors.append((path, "must have exactly one of text, raw, url, data"))
        return Part(text="")
    member = present[0]
    part = Part()
    content = value[member]
    if member == "raw":
        part.raw = _decode_bytes(content, _join(path, "raw"), errors)
    elif member == "data":
        part.data = content
    elif not isinstance(content, str):
        errors.append((_join(path, member), "must be a string"))
        return Part(text="")
    else:
        setattr(part, member, content)
    for attr, wire in (("media_type", "mediaType"), ("filename", "filename")):
        text = value.get(wire, value.get(attr))
        if text is not None:
            if not isinstance(text, str):
                errors.append((_join(path, wire), "must be a string"))
            else:
                setattr(part, attr, text)
    meta = value.get("metadata")
    if meta is not None:
        if not isinstance(meta, dict):
            errors.append((_join(path, "metadata"), "must be an object"))
        else:
            part.metadata = meta
    return part


__all__ = ["encode", "decode", "camel"]
