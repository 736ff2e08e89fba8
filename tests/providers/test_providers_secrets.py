"""API keys never reach the store, an output, a log line or an error message.

Keys are planted through the environment (OpenAI) and the settings (Anthropic); the server is
scripted to echo them back in error bodies, whole and in part, the way real APIs quote a bad
key. Then every byte the session wrote and every text a user could see is searched for them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Reply, Session
from slotmagic.errors import ProviderError
from slotmagic.providers import ProviderSettings

from .support import PLANTED_ANTHROPIC_KEY, PLANTED_OPENAI_KEY
from .wire_server import (
    DROP,
    WireServer,
    an_event,
    an_text_stream,
    json_response,
    oa_text_stream,
    sse_response,
)

Responses = list[list[Any]]  # one failing turn: the responses to its requests, retries included


def openai_failures(key: str) -> list[Responses]:
    return [
        [
            json_response(
                401,
                {
                    "error": {
                        "message": f"Incorrect API key provided: {key}.",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            )
        ],
        [json_response(400, {"error": {"message": f"bad header 'Bearer {key[:30]}'", "type": "invalid"}})],
        [json_response(500, {"error": f"proxy failed for {key}"})] * 4,
        [sse_response([f'data: {{"error": {{"message": "{key}", "type": "server_error"}}}}\n\n'])],
        [sse_response([f'data: {{"broken": "{key}\n\n'])],
        [sse_response(oa_text_stream("x")[:2], finish=False, then=[DROP])],
    ]


def anthropic_failures(key: str) -> list[Responses]:
    return [
        [
            json_response(
                401, {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {key}"}}
            )
        ],
        [json_response(529, {"type": "error", "error": {"type": "overloaded_error", "message": key}})] * 4,
        [sse_response([an_event("error", error={"type": "api_error", "message": f"...{key[5:]}"})])],
        [sse_response([f'event: message_start\ndata: {{"broken": "{key}\n\n'])],
        [sse_response(an_text_stream("x")[:3], finish=False, then=[DROP])],
    ]


def test_planted_keys_appear_nowhere(
    wire: WireServer,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log every request at DEBUG
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI_KEY)
    settings = ProviderSettings(
        openai_base_url=wire.url + "/v1",
        anthropic_base_url=wire.url,
        anthropic_api_key=PLANTED_ANTHROPIC_KEY,
        backoff_base=0.001,
    )
    session = Session.open("secrets", db_path=db_path, settings=settings)
    seen: list[str] = []

    def run(model: str, sync: bool) -> Reply:
        if sync:
            return session.submit_turn("hello", model=model)
        return asyncio.run(session.asubmit_turn("hello", model=model))

    cases = [
        ("openai:gpt-4o-mini", PLANTED_OPENAI_KEY, oa_text_stream("fine"), openai_failures),
        ("anthropic:claude-haiku-4-5", PLANTED_ANTHROPIC_KEY, an_text_stream("fine"), anthropic_failures),
    ]
    for model, key, success, failures in cases:
        for sync in (True, False):
            wire.script(sse_response(success))
            reply = run(model, sync)
            sent = wire.requests[-1].headers
            assert key in sent.get("authorization", "") + sent.get("x-api-key", "")  # the key was used
            seen += [reply.text, repr(reply), str(reply.info), reply._repr_markdown_()]
            for responses in failures(key):
                wire.script(*responses)
                with pytest.raises(ProviderError) as caught:
                    run(model, sync)
                error = caught.value
                seen += [str(error), repr(error), "".join(traceback.format_exception(error))]

    seen += [repr(session), repr(session.settings), json.dumps([t.info.to_dict() for t in session.turns()])]
    seen += [repr(m) for m in session.messages()]
    files = sorted(db_path.parent.glob(db_path.name + "*"))
    assert any(f.name.endswith("-wal") for f in files)  # the write-ahead log is searched too
    stored = [f.read_bytes() for f in files]
    session.close()
    stored += [f.read_bytes() for f in db_path.parent.glob(db_path.name + "*")]
    out, err = capsys.readouterr()
    seen += [out, err, caplog.text]

    for key in (PLANTED_OPENAI_KEY, PLANTED_ANTHROPIC_KEY):
        fragment = key[8:28]  # a piece of the key, to catch partial echoes too
        assert [text for text in seen if fragment in text] == []
        assert [blob for blob in stored if fragment.encode() in blob] == []
    assert any("[redacted]" in text for text in seen)  # the echoes did come back, and were cut out
