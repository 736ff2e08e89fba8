"""A step of the view pipeline: the tool definitions a request without tools still carries.

Both APIs refuse tool calls and results in a request that defines no tools ("Requests which
include tool_use or tool_result blocks must define tools"), so a turn that offers none on a
history holding tool calls is sent each tool called, by name, with an empty schema and a tool
choice of none (:func:`~slotmagic.providers._wire.bare_tools`: the model can call none of them).
The wire modules write them; this step names the same definitions (``build.bare_tools``, kept
on the view), so the budget counts them in its tools share and a preview says they are sent.
Only for the request formats whose wire modules add them (``ViewInputs.wire``): echo and a
provider of its own format are sent no definitions.

It runs after ``tool_pairs``, whose repairs leave every result beside its call (the calls
name every tool a result answers), and before the budget is read.
"""

from __future__ import annotations

from ...providers._wire import bare_tools as definitions
from ..view.view import ViewBuild
from . import step

BARE_TOOLS = frozenset({"openai", "anthropic"})  # the request formats whose wire modules add them


@step("wire", "tools")
def bare_tools(build: ViewBuild) -> None:
    if build.wire not in BARE_TOOLS or build.tools:
        return
    build.bare_tools = definitions([e.message for e in build.conversation])
