"""Folding events into task snapshots: what a task looks like after each event of its log.

Pure functions of the models, shared by the engine (which stores the snapshot
with every append), push delivery (0.3 webhooks carry the whole task) and any
store that rebuilds a snapshot from its log.
"""
from __future__ import annotations

import dataclasses
from typing import List, Union

from .models import Artifact, Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent

#: What a task's event log holds.  A user ``Message`` records a turn appended to
#: the history; streams do not show it.
Event = Union[Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent]


def apply_event(task: Task, event: Event) -> Task:
    """The snapshot that results from ``event``; ``task`` itself is left untouched."""
    if isinstance(event, Task):
        return event
    if isinstance(event, Message):
        # The agent's last word (say, its question) comes before the user's answer.
        return dataclasses.replace(task, history=_with_status_message(task) + [event],
                                   status=dataclasses.replace(task.status, message=None))
    if isinstance(event, TaskStatusUpdateEvent):
        # The previous status message becomes part of the conversation.
        return dataclasses.replace(task, status=event.status, history=_with_status_message(task))
    if isinstance(event, TaskArtifactUpdateEvent):
        return dataclasses.replace(task, artifacts=_merge_artifact(task.artifacts, event))
    raise TypeError(f"not a task event: {event!r}")


def _with_status_message(task: Task) -> List[Message]:
    message = task.status.message
    return task.history if message is None else task.history + [message]


def _merge_artifact(artifacts: List[Artifact], event: TaskArtifactUpdateEvent) -> List[Artifact]:
    incoming = event.artifact
    for index, existing in enumerate(artifacts):
        if existing.artifact_id == incoming.artifact_id:
            merged = (
                dataclasses.replace(existing, parts=existing.parts + incoming.parts)
                if event.append
                else incoming
            )
            return artifacts[:index] + [merged] + artifacts[index + 1:]
    return artifacts + [incoming]
