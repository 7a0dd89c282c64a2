"""The peer ``bench.py --phases peer`` measures: the official ``a2a-sdk`` server.

The same two agents as ``bench_app.py``, written with the SDK (Starlette,
served by one uvicorn process, in-memory task store), so that the load
generator sends both servers the same A2A 1.0 JSON-RPC bytes:

* ``POST /a2a``     echo agent: SUBMITTED, WORKING, the text as an artifact, COMPLETED.
* ``POST /chunks``  chunk agent: ``BENCH_CHUNKS`` (100) appended text chunks, no sleep.

Its tasks live in memory, or, when ``BENCH_SDK_STORE`` names an SQLAlchemy async
URL (``postgresql+asyncpg://...``, ``mysql+aiomysql://...``), in the SDK's
``DatabaseTaskStore`` there, in the tables ``BENCH_SDK_TABLE`` + ``_a2a`` and
``_chunks`` (``bench/stores.py --phases peer`` uses this).

Serve it by hand with::

    uvicorn --app-dir bench sdk_peer:app --port 8001 --no-access-log
"""
from __future__ import annotations

import os

from a2a.helpers.proto_helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Task,
                       TaskState, TaskStatus)
from starlette.applications import Starlette

CHUNKS = int(os.environ.get("BENCH_CHUNKS", "100"))
BASE = f"http://127.0.0.1:{os.environ.get('BENCH_PORT', '8000')}"
STORE_URL = os.environ.get("BENCH_SDK_STORE", "")
TABLE = os.environ.get("BENCH_SDK_TABLE", "a2a_sdk_bench")


def card(name: str, path: str) -> AgentCard:
    """A minimal streaming card for the agent served at ``path``."""
    return AgentCard(
        name=name, description=f"{name} (a2a-sdk peer)", version="1.0.0",
        supported_interfaces=[AgentInterface(url=BASE + path, protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id=name.lower(), name=name, description=name, tags=["bench"])],
    )


async def start(context: RequestContext, queue: EventQueue) -> TaskUpdater:
    """Make the task (SUBMITTED, with the user's message) and set it WORKING."""
    if context.current_task is None:
        await queue.enqueue_event(Task(id=context.task_id, context_id=context.context_id,
                                       status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                                       history=[context.message]))
    updater = TaskUpdater(queue, context.task_id, context.context_id)
    await updater.start_work()
    return updater


class Echo(AgentExecutor):
    """Completes the task with the input text as an artifact."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await start(context, event_queue)
        await updater.add_artifact([new_text_part(context.get_user_input())], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class Chunks(Echo):
    """Streams CHUNKS appended chunks of one artifact as fast as it can."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await start(context, event_queue)
        for index in range(CHUNKS):
            await updater.add_artifact([new_text_part(f"chunk {index} ")], artifact_id="chunks",
                                       append=index > 0, last_chunk=index == CHUNKS - 1)
        await updater.complete()


def task_store(name: str) -> TaskStore:
    """In memory, or the SDK's database store at ``BENCH_SDK_STORE`` (one engine each)."""
    if not STORE_URL:
        return InMemoryTaskStore()
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine

    return DatabaseTaskStore(create_async_engine(STORE_URL), table_name=f"{TABLE}_{name}")


def routes(executor: AgentExecutor, agent_card: AgentCard, path: str) -> list:
    handler = DefaultRequestHandler(agent_executor=executor,
                                    task_store=task_store(path.strip("/")),
                                    agent_card=agent_card)
    return create_jsonrpc_routes(handler, path)


ECHO_CARD = card("Echo", "/a2a")
app = Starlette(routes=[
    *create_agent_card_routes(ECHO_CARD),
    *routes(Echo(), ECHO_CARD, "/a2a"),
    *routes(Chunks(), card("Chunks", "/chunks"), "/chunks"),
])
