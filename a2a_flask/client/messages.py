"""Building the user's messages: text, a file from disk, JSON data, or all three."""
from __future__ import annotations

import mimetypes
import os
from typing import Any, Dict, Iterable, List, Optional, Union

from ..protocol.models import UNSET, Message, Part, Role, new_id

PathLike = Union[str, "os.PathLike[str]"]


def text_part(text: str) -> Part:
    """A text part."""
    return Part(text=text)


def file_part(path: PathLike, media_type: Optional[str] = None) -> Part:
    """A part holding a file's bytes, named after it, its media type guessed from
    the name (``application/octet-stream`` when unknown)."""
    name = os.fspath(path)
    with open(name, "rb") as handle:
        raw = handle.read()
    guessed = media_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
    return Part(raw=raw, filename=os.path.basename(name), media_type=guessed)


def data_part(value: Any, media_type: str = "application/json") -> Part:
    """A structured-data part (any JSON value)."""
    return Part(data=value, media_type=media_type)


def make_message(text: Optional[str] = None, *, file: Optional[PathLike] = None,
                 data: Any = UNSET, parts: Iterable[Part] = (), context_id: str = "",
                 task_id: str = "", reference_task_ids: Iterable[str] = (),
                 metadata: Optional[Dict[str, Any]] = None,
                 extensions: Iterable[str] = ()) -> Message:
    """A user message with a fresh ``message_id``: the text, then the file, then
    the data, then any other ``parts``, each as a part of its own.

    :raises ValueError: when there is no content at all.
    """
    content: List[Part] = []
    if text is not None:
        content.append(text_part(text))
    if file is not None:
        content.append(file_part(file))
    if data is not UNSET:
        content.append(data_part(data))
    content.extend(parts)
    if not content:
        raise ValueError("A message needs text, a file, data or parts")
    return Message(message_id=new_id(), role=Role.USER, parts=content, context_id=context_id or "",
                   task_id=task_id or "", reference_task_ids=list(reference_task_ids),
                   metadata=metadata, extensions=list(extensions))


def artifact_text(artifact: Any) -> str:
    """The text parts of an artifact (or message) joined together, without separators."""
    return "".join(p.text for p in getattr(artifact, "parts", []) if p.text is not None)


__all__ = ["text_part", "file_part", "data_part", "make_message", "artifact_text"]
