"""A step of the view pipeline: messages with nothing in them are not sent.

A message whose text is blank, with no image or tool call, says nothing, and the APIs refuse it
("text content blocks must contain non-whitespace text"); the wire modules leave it out. Left
out here, the preview and the budget do not show or count what is never sent; a stored one is
shown greyed where it was (``blank``). A reply can be blank: a model that answered with nothing,
a reply cut short, one that spent its tokens thinking.

Reasoning kept beside a blank reply is sent alone only where the request format sends it
(``ViewInputs.wire``): chat completions send no reasoning; Anthropic's Messages API takes no
assistant message that ends with a thinking block, so its wire module sends thinking alone as
nothing, and only a kept server-tool or compaction block (kind ``block``) says something. For a
provider of its own format (echo) any reasoning keeps the message, as it always did.
"""

from __future__ import annotations

from ...providers._wire import sends_nothing
from ..view.view import Omitted, ViewBuild
from . import step


@step("wire")
def blank_messages(build: ViewBuild) -> None:
    wire = build.wire
    for entries in (build.system, build.conversation):
        # Text first: most messages have some, and the check runs for every one of a long view.
        left = [e for e in entries if (not (c := e.message.content) or c.isspace()) and sends_nothing(e.message, wire)]
        if left:
            entries[:] = [e for e in entries if not sends_nothing(e.message, wire)]
            build.omitted += [Omitted(e.position, e.position + 1, "blank") for e in left if e.position is not None]
