"""Settings from the environment and ``%config`` never give a traceback, in a real IPython
shell: a bad ``SLOTMAGIC_*`` variable stops ``%load_ext`` with one line and leaves nothing
half-loaded; a refused ``%config`` value is one line and does not stick, so ``%reload_ext``
always works."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

from slotmagic import Session
from slotmagic.providers import REGISTRY

VARIABLES = (
    "SLOTMAGIC_CONNECT_TIMEOUT",
    "SLOTMAGIC_READ_TIMEOUT",
    "SLOTMAGIC_TURN_TIMEOUT",
    "SLOTMAGIC_MAX_RETRIES",
    "SLOTMAGIC_MAX_REPLY_BYTES",
    "SLOTMAGIC_STREAM_THROTTLE",
)


def magic(ip: Any) -> Any:
    from slotmagic._magics import SlotMagic

    found = [c for c in ip.configurables if isinstance(c, SlotMagic)]
    assert len(found) == 1
    return found[0]


def session(ip: Any) -> Session:
    return magic(ip).session()  # type: ignore[no-any-return]


def loaded(ip: Any) -> bool:
    """Whether anything of the extension is registered with the shell."""
    return (
        ip.find_line_magic("slot") is not None
        or ip.find_cell_magic("turn") is not None
        or any(type(c).__name__ == "SlotMagic" for c in ip.configurables)
    )


@pytest.fixture
def bare(ip: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The shell without the extension, as a kernel is before ``%load_ext slotmagic``."""
    import slotmagic

    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    slotmagic.unload_ipython_extension(ip)
    ip.extension_manager.loaded.discard("slotmagic")
    yield ip
    ip.extension_manager.loaded.discard("slotmagic")
    if not loaded(ip):
        slotmagic.load_ipython_extension(ip)  # for the ip fixture's teardown


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SLOTMAGIC_READ_TIMEOUT", "abc"),
        ("SLOTMAGIC_READ_TIMEOUT", "-1"),
        ("SLOTMAGIC_CONNECT_TIMEOUT", "0"),
        ("SLOTMAGIC_TURN_TIMEOUT", "-5"),
        ("SLOTMAGIC_TURN_TIMEOUT", "soon"),
        ("SLOTMAGIC_MAX_RETRIES", "x"),
        ("SLOTMAGIC_MAX_RETRIES", "-1"),
        ("SLOTMAGIC_MAX_RETRIES", "2.5"),
        ("SLOTMAGIC_MAX_REPLY_BYTES", "0"),
        ("SLOTMAGIC_MAX_REPLY_BYTES", "16MB"),
        ("SLOTMAGIC_STREAM_THROTTLE", "x"),
        ("SLOTMAGIC_STREAM_THROTTLE", "-1"),
        ("SLOTMAGIC_STREAM_THROTTLE", "nan"),
    ],
)
def test_a_bad_variable_stops_load_ext_with_one_line_and_leaves_nothing(
    bare: Any, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError) as caught:
        bare.run_cell("%load_ext slotmagic")
    message = str(caught.value)
    assert message.startswith(f"{variable}={value!r} cannot be used: ") and "\n" not in message
    assert f"set e.g. {variable}=" in message  # a value that works
    assert not loaded(bare) and "slotmagic" not in bare.extension_manager.loaded

    monkeypatch.delenv(variable)  # fixed: loading again just works
    bare.run_cell("%load_ext slotmagic")
    bare.run_cell("%slot list")
    assert loaded(bare)


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("SLOTMAGIC_TURN_TIMEOUT", "0", "turn_timeout", None),
        ("SLOTMAGIC_TURN_TIMEOUT", "90", "turn_timeout", 90.0),
        ("SLOTMAGIC_MAX_REPLY_BYTES", "1048576", "max_reply_bytes", 1048576),
        ("SLOTMAGIC_CONNECT_TIMEOUT", " 2.5 ", "connect_timeout", 2.5),
        ("SLOTMAGIC_MAX_RETRIES", "0", "max_retries", 0),
    ],
)
def test_good_variables_reach_the_provider_settings(
    bare: Any, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str, expected: object
) -> None:
    monkeypatch.setenv(variable, value)
    bare.run_cell("%load_ext slotmagic")
    assert getattr(session(bare).settings, field) == expected


def test_a_refused_config_value_does_not_stick(ip: Any, caplog: pytest.LogCaptureFixture) -> None:
    ip.run_cell("%config SlotMagic.read_timeout = 'abc'")
    assert caplog.records[-1].getMessage() == (
        "SlotMagic.read_timeout = 'abc' refused: read_timeout must be a positive number of seconds, "
        "at most 86400 (a day), e.g. 300, not 'abc'; it stays 120.0"
    )
    assert "read_timeout" not in dict.get(ip.config, "SlotMagic", {})  # not kept for the next load
    ip.run_cell("%reload_ext slotmagic")  # used to fail here, leaving %slot undefined
    ip.run_cell("%slot list")
    assert session(ip).settings.read_timeout == 120.0

    # An accepted value survives a later refused one, in the object and in the shell's config.
    ip.run_cell("%config SlotMagic.read_timeout = 30")
    ip.run_cell("%config SlotMagic.read_timeout = -2")
    assert "it stays 30.0" in caplog.records[-1].getMessage()
    assert ip.config.SlotMagic.read_timeout == 30
    ip.run_cell("%reload_ext slotmagic")
    assert session(ip).settings.read_timeout == 30.0


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("connect_timeout", "0"),
        ("turn_timeout", "-1"),
        ("max_retries", "'many'"),
        ("max_reply_bytes", "-5"),
        ("stream_throttle", "-0.5"),
        ("openai_base_url", "'localhost:8080/v1'"),
        ("ollama_host", "'ftp://gpu-box'"),
        ("prices", "{'openai:x': (1,)}"),
    ],
)
def test_every_refusal_is_one_line_and_reload_works(
    ip: Any, caplog: pytest.LogCaptureFixture, setting: str, value: str
) -> None:
    before = getattr(magic(ip), setting)
    ip.run_cell(f"%config SlotMagic.{setting} = {value}")
    message = caplog.records[-1].getMessage()
    assert message.startswith(f"SlotMagic.{setting} = ") and " refused: " in message and "\n" not in message
    assert getattr(magic(ip), setting) == before
    ip.run_cell("%reload_ext slotmagic")
    ip.run_cell("%slot list")


def test_a_bad_value_from_a_config_file_is_ignored_with_one_line(ip: Any, caplog: pytest.LogCaptureFixture) -> None:
    # ipython_config.py, or a value set before the extension was loaded: nothing checked it.
    ip.config.SlotMagic.max_retries = "lots"
    ip.config.SlotMagic.read_timeout = 45
    ip.run_cell("%reload_ext slotmagic")
    warnings = [r.getMessage() for r in caplog.records if r.name == "slotmagic" and r.levelno == logging.WARNING]
    assert warnings == [
        "SlotMagic.max_retries = 'lots' refused: max_retries must be a whole number from 0 to 100, e.g. 5, "
        "not 'lots'; it stays 3"
    ]
    assert (session(ip).settings.max_retries, session(ip).settings.read_timeout) == (3, 45)
    ip.run_cell("%slot list")


def test_turn_timeout_and_max_reply_bytes_are_settings(ip: Any) -> None:
    ip.run_cell("%config SlotMagic.turn_timeout = 30")
    ip.run_cell("%config SlotMagic.max_reply_bytes = 1_000_000")
    settings = session(ip).settings
    assert (settings.turn_timeout, settings.max_reply_bytes) == (30.0, 1_000_000)
    ip.run_cell("%config SlotMagic.turn_timeout = 0")
    assert session(ip).settings.turn_timeout is None  # 0: no limit
    ip.run_cell("%config SlotMagic.turn_timeout = None")
    assert session(ip).settings.turn_timeout is None


def test_the_traits_come_from_the_registry(ip: Any) -> None:
    traits = set(magic(ip).trait_names(config=True))
    for setting in REGISTRY.settings():
        assert (setting.name in traits) is not setting.secret  # keys only ever from the environment


def test_config_never_prints_url_credentials(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    password = "cfg-pa55w0rd-9911"
    ip.run_cell(f"%config SlotMagic.openai_base_url = 'http://bob:{password}@proxy.example/v1'")
    ip.run_cell("%config SlotMagic")
    ip.run_cell("%config SlotMagic.openai_base_url")
    shown = repr(ip.user_ns["_"])
    out = capsys.readouterr().out
    assert "http://***@proxy.example/v1" in out and password not in out + shown
    assert password not in repr(session(ip).settings)
    assert session(ip).settings.openai_base_url == f"http://bob:{password}@proxy.example/v1"  # still used as is
