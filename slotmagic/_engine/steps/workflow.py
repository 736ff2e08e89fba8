"""A step of the view pipeline: the session's active workflow, as one system message.

It goes on the system side after the system prompt, a compaction's summary and whatever the
slot's mode keeps there, so it counts in the budget's system share and lowers the compaction
threshold (seed T1). No active workflow, nothing added: the request is what it was without it.
"""

from __future__ import annotations

from ..._core.messages import Message
from ..view.view import ViewBuild
from . import step


@step("workflow")
def workflow_block(build: ViewBuild) -> None:
    if build.workflow is not None:
        build.system.append(build.inject(Message.system(build.workflow.block()), "workflow"))
