"""A step of the view pipeline: messages with nothing in them are not sent.

A message whose text is blank, with no image, tool call or reasoning, says nothing, and the
APIs refuse it ("text content blocks must contain non-whitespace text"); the wire modules leave
it out. Left out here, the preview and the budget do not show or count what is never sent; a
stored one is shown greyed where it was (``blank``). A reply can be blank: a model that
answered with nothing, a reply cut short.
"""

from __future__ import annotations

from ...core.messages import Message
from ..view import Omitted, ViewBuild
from . import step


def blank(message: Message) -> bool:
    content = message.content
    return (
        (not content or content.isspace())
        and message.role != "tool"
        and not (message.images or message.tool_calls or message.thinking)
    )


@step()
def blank_messages(build: ViewBuild) -> None:
    for entries in (build.system, build.conversation):
        # Text first: most messages have some, and the check runs for every one of a long view.
        left = [e for e in entries if (not (c := e.message.content) or c.isspace()) and blank(e.message)]
        if left:
            entries[:] = [e for e in entries if not blank(e.message)]
            build.omitted += [Omitted(e.position, e.position + 1, "blank") for e in left if e.position is not None]
