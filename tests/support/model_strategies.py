"""Hypothesis strategies for the 1.0 models, built from their type hints.

``models(cls)`` draws instances of any dataclass in ``a2a_flask.protocol.models``
with every member set or left at its default, nested models included: the
property tests of the codecs (text encoders, frozen tasks) run on these.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import enum
import typing
from typing import Any, Dict, List

from hypothesis import strategies as st

from a2a_flask.protocol.models import Part, PartList

text = st.text(max_size=8)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6)
metadata = st.none() | st.dictionaries(text, json_value, max_size=3)

#: A part holds one of text, raw, url or data, and may hold the rest.
part = st.one_of(
    st.builds(Part, text=text), st.builds(Part, raw=st.binary(max_size=8)),
    st.builds(Part, url=text), st.builds(Part, data=json_value),
).flatmap(lambda made: st.builds(lambda media_type, filename, meta: dataclasses.replace(
    made, media_type=media_type, filename=filename, metadata=meta), text, text, metadata))

_MADE: Dict[Any, st.SearchStrategy[Any]] = {}


def models(cls: type) -> st.SearchStrategy[Any]:
    """Instances of the model ``cls``, each member drawn or left at its default."""
    if cls is Part:
        return part
    found = _MADE.get(cls)
    if found is None:
        _MADE[cls] = st.deferred(lambda: models(cls))  # a model may contain itself
        hints = typing.get_type_hints(cls)
        members = {f.name: st.just(_MISSING) | _of(hints[f.name])
                   for f in dataclasses.fields(cls)}
        found = _MADE[cls] = st.fixed_dictionaries(members).map(
            lambda drawn: cls(**{k: v for k, v in drawn.items() if v is not _MISSING}))
    return found


_MISSING = object()


def _of(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Union:  # Optional[X]
        return st.none() | st.one_of(*[_of(arg) for arg in typing.get_args(tp)
                                       if arg is not type(None)])
    if origin in (list, List):
        return st.lists(_of(typing.get_args(tp)[0]), max_size=2)
    if origin is collections.abc.MutableSequence:  # a list, or a snapshot's PartList
        return st.lists(_of(typing.get_args(tp)[0]), max_size=2).flatmap(
            lambda drawn: st.sampled_from([drawn, PartList(drawn)]))
    if origin in (dict, Dict):
        return st.dictionaries(text, _of(typing.get_args(tp)[1]), max_size=2)
    if tp is Any:
        return json_value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return models(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(tp)
    return {str: text, bool: st.booleans(), int: st.integers(-2**31, 2**31 - 1),
            float: st.floats(allow_nan=False), bytes: st.binary(max_size=8)}[tp]
