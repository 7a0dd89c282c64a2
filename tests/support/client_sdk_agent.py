"""An agent built on the official ``a2a-sdk`` (Starlette, run by uvicorn) for the
client interop tests.  ``A2A_SDK_PORT`` names the port its card advertises.

Behaviour by the first word of the text:

``stream``  WORKING, three text chunks 100 ms apart, then COMPLETED
``slow``    WORKING, four text chunks 300 ms apart, then COMPLETED
``hold``    WORKING until canceled (at most 20 s)
otherwise   one text artifact echoing the text, then COMPLETED

It serves A2A 1.0 (JSON-RPC at ``/a2a``, HTTP+JSON at ``/rest``) and, through
the SDK's compatibility layer, 0.3 JSON-RPC at ``/a2a`` as well.
"""
import asyncio
import os

from a2a.helpers.proto_helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Task, TaskState
from a2a.types import TaskStatus
from starlette.applications import Starlette

BASE = f"http://127.0.0.1:{os.environ.get('A2A_SDK_PORT', '8000')}"

CARD = AgentCard(
    name="SDK agent",
    description="An a2a-sdk agent for the a2a_flask client tests",
    version="1.0.0",
    supported_interfaces=[
        AgentInterface(url=BASE + "/a2a", protocol_binding="JSONRPC", protocol_version="1.0"),
        AgentInterface(url=BASE + "/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
        AgentInterface(url=BASE + "/a2a", protocol_binding="JSONRPC", protocol_version="0.3"),
    ],
    capabilities=AgentCapabilities(streaming=True, push_notifications=False),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[AgentSkill(id="echo", name="Echo", description="Echoes text", tags=["echo"])],
)


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        command = (text.split() or [""])[0]
        if context.current_task is None:
            await event_queue.enqueue_event(Task(
                id=context.task_id, context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message]))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if command in ("stream", "slow"):
            count, pause = (3, 0.1) if command == "stream" else (4, 0.3)
            for index in range(count):
                await asyncio.sleep(pause)
                await updater.add_artifact([new_text_part(f"part-{index} ")], artifact_id="story",
                                           append=index > 0, last_chunk=index == count - 1)
            await updater.complete()
        elif command == "hold":
            await asyncio.sleep(20)
            await updater.complete()
        else:
            await updater.add_artifact([new_text_part(text)], name="echo")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(),
                                agent_card=CARD)
app = Starlette(routes=[
    *create_agent_card_routes(CARD),
    *create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=True),
    *create_rest_routes(handler, path_prefix="/rest"),
])
