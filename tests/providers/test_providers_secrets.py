"""API keys and URL passwords never reach the store, an output, a log line or an error message.

A key and a base-URL password are planted, on both providers: the OpenAI key from the
environment (sent as Bearer), the OpenAI key with credentials in the URL (Basic wins, the
key is not sent), and the Anthropic key beside credentials in its URL (both sent). Every turn
runs sync and async: a success, a recovered failure, then every failure mode of the wire
server, each with a server that quotes the key, the password, ``user:password``, the Basic
token and the URL itself back wherever a real server might. Then every byte the session wrote
(the SQLite file, its WAL) and every text a user could see (replies, reprs, exception texts and
tracebacks, stdout/stderr, log records of httpx, httpcore and slotmagic at DEBUG) is searched.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import traceback
from pathlib import Path

import pytest

from slotmagic import Reply, Session
from slotmagic._errors import ProviderError
from slotmagic.providers import ProviderSettings

from .failures import FAILURES, RECOVERIES, success, timed_for
from .support import PLANTED_ANTHROPIC_KEY, PLANTED_OPENAI_KEY
from .wire_server import WireServer, sse_response

USER, PASSWORD = "alice", "PLANTED-url-pa55w0rd-e1d2c3"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
RETRIES = 1


def secrets_of(key: str) -> list[str]:
    """What must appear nowhere: pieces of the key (partial echoes count), the password, the
    pair, the Basic token and a piece of it."""
    return [key[8:28], key[-16:], PASSWORD, f"{USER}:{PASSWORD}", TOKEN, TOKEN[4:20]]


@pytest.mark.slow
def test_planted_keys_and_url_passwords_appear_nowhere(
    wire: WireServer,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("httpx", "httpcore", "slotmagic", ""):
        caplog.set_level(logging.DEBUG, logger=name)  # httpx logs every request, httpcore every step
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_OPENAI_KEY)
    credentialed = wire.url.replace("://", f"://{USER}:{PASSWORD}@")
    plain = ProviderSettings(
        openai_base_url=wire.url + "/v1",  # the key comes from the environment
        max_retries=RETRIES,
        backoff_base=0.001,
        max_reply_bytes=64 * 1024,
    )
    with_url_credentials = plain.replace(
        openai_base_url=credentialed + "/v1",
        openai_api_key=PLANTED_OPENAI_KEY,
        anthropic_base_url=credentialed,
        anthropic_api_key=PLANTED_ANTHROPIC_KEY,
    )
    session = Session.open("secrets", db_path=db_path, settings=plain)
    seen: list[str] = []
    errors: set[str] = set()

    def run(model: str, sync: bool) -> Reply:
        if sync:
            return session.submit_turn("hello", model=model)
        return asyncio.run(session.asubmit_turn("hello", model=model))

    cases = [
        ("openai", "openai:gpt-4o-mini", plain, "Bearer " + PLANTED_OPENAI_KEY),
        ("openai", "openai:gpt-4o-mini", with_url_credentials, "Basic " + TOKEN),
        ("anthropic", "anthropic:claude-haiku-4-5", with_url_credentials, "Basic " + TOKEN),
    ]
    for protocol, model, settings, authorization in cases:
        session.settings = settings
        key = PLANTED_OPENAI_KEY if protocol == "openai" else PLANTED_ANTHROPIC_KEY
        echo = f"key {key}"  # a server can quote only what it was given (or what it already knew)
        if settings is with_url_credentials:
            echo += f" auth Basic {TOKEN} user {USER}:{PASSWORD} url {credentialed}"
        for sync in (True, False):
            session.settings = timed_for(settings)
            wire.script(sse_response(success(protocol, "fine")))
            reply = run(model, sync)
            assert wire.requests[-1].headers["authorization"] == authorization  # what was really sent
            if protocol == "anthropic":
                assert wire.requests[-1].headers["x-api-key"] == PLANTED_ANTHROPIC_KEY
            wire.script(*RECOVERIES["5xx then success"](protocol, echo, "recovered"))
            replies = [reply, run(model, sync)]
            for r in replies:
                seen += [r.text, repr(r), str(r.info), r._repr_html_()]
            for name, failure in FAILURES.items():
                session.settings = timed_for(settings, failure)
                wire.script(*failure.responses(protocol, echo, RETRIES))
                with pytest.raises(failure.error) as caught:
                    run(model, sync)
                error: ProviderError = caught.value
                seen += [str(error), repr(error), "".join(traceback.format_exception(error))]
                errors.add(type(error).__name__)
                assert "\n" not in str(error), name
        provider = session._engine.pool.kept()[protocol]  # the live provider object, as a user could repr it
        seen += [repr(provider), repr(provider.settings)]  # type: ignore[attr-defined]

    seen += [
        repr(session),
        repr(session.settings),
        str(session.settings),
        json.dumps([t.info.to_dict() for t in session.history.turns()]),
    ]
    seen += [repr(m) for m in session.messages()]
    files = sorted(db_path.parent.glob(db_path.name + "*"))
    assert any(f.name.endswith("-wal") for f in files)  # the write-ahead log is searched too
    stored = [f.read_bytes() for f in files]
    session.close()
    stored += [f.read_bytes() for f in db_path.parent.glob(db_path.name + "*")]
    out, err = capsys.readouterr()
    seen += [out, err, caplog.text, *(r.getMessage() for r in caplog.records)]

    loggers = {r.name.split(".")[0] for r in caplog.records}
    assert {"httpx", "httpcore", "slotmagic"} <= loggers  # the logs searched did hold records
    assert errors == {f.error.__name__ for f in FAILURES.values()}  # every failure mode ran
    for key in (PLANTED_OPENAI_KEY, PLANTED_ANTHROPIC_KEY):
        for secret in secrets_of(key):
            assert [text for text in seen if secret in text] == [], secret
            assert [blob for blob in stored if secret.encode() in blob] == [], secret
    assert any("[redacted]" in text for text in seen)  # the echoes did come back, and were cut out
