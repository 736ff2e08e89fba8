"""Token counting.

Until exact per-model counting arrives, slotmagic stores an *estimate* with every message:
one token per 4 characters of ASCII text (rounded up), one token per non-ASCII character
(CJK text and emoji run close to one token each in current BPE vocabularies), plus a fixed
overhead of 4 tokens per message for the role and separators of the chat format. Estimates
err on the high side for prose, which is the safe side for a budget.
"""

from __future__ import annotations

from .messages import Message

MESSAGE_OVERHEAD = 4


def estimate_text_tokens(text: str) -> int:
    if text.isascii():
        return -(-len(text) // 4)
    non_ascii = sum(1 for ch in text if ord(ch) > 127)
    return -(-(len(text) - non_ascii) // 4) + non_ascii


def estimate_message_tokens(message: Message) -> int:
    tokens = MESSAGE_OVERHEAD + estimate_text_tokens(message.content)
    for call in message.tool_calls:
        tokens += estimate_text_tokens(call.name) + estimate_text_tokens(call.arguments) + 3
    if message.tool_call_id:
        tokens += estimate_text_tokens(message.tool_call_id)
    return tokens
