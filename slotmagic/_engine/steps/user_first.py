"""A step of the view pipeline: Anthropic's API is sent a user message first.

Its Messages API refuses a conversation that starts with the assistant's message ("first
message must use the user role"), and a view can start with one: a focused slot's last
messages, a compaction that folded up to a question, the first question excluded. For a model
whose provider speaks that format (``ViewInputs.wire``) a short user message saying the
conversation starts from an earlier point goes before it, an ``opening`` entry counted like
any other, so the preview and the budget hold what is sent. Chat completions take an assistant
message first, so other models are sent the view as it is.

System messages do not count as first: Anthropic sends them apart, in its ``system`` field. It
runs after ``tool_pairs`` (which may make a result without its call the first message, as a
user one) and counts what it adds. The Anthropic wire module still adds the message to a
request made without the pipeline; on a view that starts with a user message that changes
nothing.
"""

from __future__ import annotations

from ..._core.messages import Message
from ...providers._wire import EARLIER
from ..view.view import ViewBuild, ViewEntry
from . import step

USER_FIRST = frozenset({"anthropic"})  # the request formats that want a user message first


@step("wire", "counting")
def user_first(build: ViewBuild) -> None:
    if build.wire not in USER_FIRST:
        return
    entries = build.conversation
    first = next((i for i, e in enumerate(entries) if e.message.role != "system"), None)
    if first is None or entries[first].message.role != "assistant":
        return
    opening = Message.user(EARLIER)
    entries.insert(first, ViewEntry(opening, "opening", None, build.counting.count(opening)))
