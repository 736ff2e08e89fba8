"""A provider is one registration: its window, prices and exact-count rule are in its
``ProviderSpec``, and a package adds one through the ``slotmagic.providers`` entry point group."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from slotmagic.providers._registry import ENTRY_POINTS, REGISTRY, ProviderSpec, Registry, group_may_be_named
from slotmagic.providers._window_rules import FixedWindow

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = '''
from slotmagic.providers import (
    Completion, FixedWindow, KeyedEndpoint, Message, ProviderSpec, SettingSpec, TextDelta, Usage,
)


class Tiny:
    """Answers with what it heard: a provider a package could ship."""

    def __init__(self, settings, *, name, registry):
        self.name = name

    def stream(self, request):
        text = "tiny heard " + request.messages[-1].content
        yield TextDelta(text)
        yield Completion(Message.assistant(text), Usage(7, 3))

    async def astream(self, request):
        for event in self.stream(request):
            yield event

    def close(self):
        pass


SPEC = ProviderSpec(
    "tiny",
    "tiny_provider:Tiny",
    summary="a tiny provider from a package",
    example="tiny:one",
    settings=(
        SettingSpec("tiny_key", "TINY_KEY", "required", secret=True),
        SettingSpec("tiny_base_url", "TINY_BASE_URL", "`http://127.0.0.1:9`", url=True, help="Where tiny answers."),
    ),
    endpoint=KeyedEndpoint("tiny_base_url", "tiny_key", "http://127.0.0.1:9"),
    window=FixedWindow(4096, "tiny's own"),
    price=(1.0, 2.0, None),
    exact_count=True,
)


def make_spec():
    return SPEC
'''

RUN = """
import json, logging
logging.basicConfig(format="%(levelname)s %(message)s")
from slotmagic import Session
from slotmagic.providers import KNOWN_PROVIDERS, ProviderSettings, price_of
from slotmagic.providers import window_for
from slotmagic.tokens import TokenCounter
with Session.open("nb", db_path=":memory:", model="tiny:one") as s:
    reply = s.submit_turn("hello")
    cost = s.usage
print(json.dumps({
    "reply": reply.text,
    "known": "tiny" in KNOWN_PROVIDERS,
    "window": window_for("tiny:one"),
    "price": price_of("tiny:one"),
    "encoding": TokenCounter.for_model("tiny:gpt-4o").encoding,
    "settings": repr(ProviderSettings(tiny_key="sekrit-key", tiny_base_url="http://u:pw@127.0.0.1:9")),
}))
"""


def install_tiny(site: Path, entry_points: str) -> None:
    """A distribution as pip leaves one: a module and its dist-info."""
    (site / "tiny_provider.py").write_text(PLUGIN)
    info = site / "tiny_provider-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-provider\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[slotmagic.providers]\n{entry_points}")


def test_a_package_adds_a_provider_through_its_entry_point(tmp_path: Path) -> None:
    install_tiny(tmp_path, "tiny = tiny_provider:SPEC\nbroken = tiny_provider:MISSING\n")
    done = subprocess.run(
        [sys.executable, "-c", RUN],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found == {
        "reply": "tiny heard hello",
        "known": True,
        "window": [4096, True],
        "price": [1.0, 2.0],
        "encoding": "o200k_base",  # its spec says its model names are OpenAI's
        "settings": found["settings"],
    }
    # its settings are ProviderSettings fields, masked as its registration says
    assert "tiny_key='***'" in found["settings"] and "tiny_base_url='http://***@127.0.0.1:9'" in found["settings"]
    assert "sekrit" not in found["settings"] and "pw" not in found["settings"]
    # the broken entry is one line, and the rest of slotmagic loads
    [warning] = [line for line in done.stderr.splitlines() if "broken" in line]
    assert warning.startswith("WARNING provider 'broken' from tiny_provider:MISSING was not registered")


def test_entry_points_register_specs_or_functions_and_skip_what_is_no_spec(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "tiny_provider.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    group = "slotmagic.providers"
    entries = [
        importlib.metadata.EntryPoint("tiny", "tiny_provider:make_spec", group),
        importlib.metadata.EntryPoint("again", "tiny_provider:SPEC", group),  # the same name twice
        importlib.metadata.EntryPoint("odd", "tiny_provider:PLUGIN_IS_NOT_HERE", group),
        importlib.metadata.EntryPoint("text", "json:dumps", group),  # a function that needs arguments
    ]

    def entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        assert group == "slotmagic.providers"
        return entries

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    registry = Registry([spec for spec in REGISTRY if spec.name == "echo"])
    with caplog.at_level(logging.WARNING, logger="slotmagic"):
        assert registry.load_entry_points() == ["tiny"]
    assert registry.parse_model("tiny:one") == ("tiny", "one")
    assert [r.message.split(" was not")[0] for r in caplog.records] == [
        "provider 'again' from tiny_provider:SPEC",
        "provider 'odd' from tiny_provider:PLUGIN_IS_NOT_HERE",
        "provider 'text' from json:dumps",
    ]
    assert "registered already" in caplog.records[0].message


def test_no_table_outside_a_registration_names_a_provider() -> None:
    """What the windows, prices and token counting know of each built-in provider is in its spec."""
    by_name = {spec.name: spec for spec in REGISTRY}
    assert by_name["openai"].exact_count and by_name["openai"].catalog == "openai"
    assert not by_name["anthropic"].exact_count and by_name["anthropic"].catalog == "anthropic"
    assert by_name["ollama"].price == (0.0, 0.0, 0.0) and by_name["ollama"].window is not None
    assert by_name["echo"].window == FixedWindow(8_192, "the offline test model")
    source = "\n".join(
        (ROOT / "slotmagic" / path).read_text()
        for path in ("tokens/_counter.py", "providers/_prices.py", "providers/_catalog.py", "providers/_windows.py")
    )
    for name in ("openai", "anthropic", "ollama", "echo"):
        assert f'"{name}"' not in source and f"'{name}'" not in source, name


def test_a_spec_made_here_is_registered_like_a_built_in_one() -> None:
    registry = Registry()
    spec = registry.register(ProviderSpec("mine", "tiny_provider:Tiny", summary="mine", example="mine:x"))
    assert registry.get("mine") is spec and registry.get("nobody") is None


def test_entry_points_are_parsed_only_when_an_installed_package_names_the_group(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``import slotmagic`` parses every distribution's entry points only when one of them
    may name ``slotmagic.providers``: a search of the entry_points.txt files says so first."""
    site = tmp_path / "site"
    site.mkdir()
    other = site / "other-1.0.dist-info"
    other.mkdir()
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing")])
    assert not group_may_be_named(ENTRY_POINTS)
    install_tiny(site, "tiny = tiny_provider:SPEC\n")
    assert group_may_be_named(ENTRY_POINTS)
    archive = tmp_path / "packages.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\x00" * 18)  # an empty zip: importlib reads what it holds
    monkeypatch.setattr(sys, "path", [str(archive)])
    assert group_may_be_named(ENTRY_POINTS)


HOSTILE = """
import argparse, os

MODE = os.environ["HOSTILE_MODE"]
if MODE == "exit":
    argparse.ArgumentParser().parse_args(["--no-such-flag"])  # a module-level argparse in a kernel: SystemExit
if MODE == "interrupt":
    raise KeyboardInterrupt
if MODE == "leak":
    raise RuntimeError("cannot start: key is " + os.environ["OPENAI_API_KEY"])

from slotmagic.providers import ProviderSpec


class Grumpy:
    def __init__(self, settings, *, name, registry):
        if MODE == "construct-exit":
            raise SystemExit(3)
        raise RuntimeError("no connection for " + os.environ["OPENAI_API_KEY"])


SPEC = ProviderSpec("grumpy", "hostile_provider:Grumpy", summary="raises when made", example="grumpy:x")
MISSING = ProviderSpec("ghost", "no_such_module_anywhere:Ghost", summary="its module is gone", example="ghost:x")
"""

LOAD = """
import sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "slotmagic")
print("loaded:", "turn" in shell.magics_manager.magics["cell"])
for model in sys.argv[1:]:
    result = shell.run_cell(f"%%turn --model {model}\\nhello")
    print("turn:", type(result.error_in_exec).__name__, str(result.error_in_exec))
"""

KEY = "sk-planted-0123456789abcdefghijklmnop"


@pytest.mark.parametrize("mode", ["exit", "interrupt", "leak", "construct", "construct-exit"])
def test_a_broken_plugin_is_named_never_stops_loading_and_never_leaks_a_key(tmp_path: Path, mode: str) -> None:
    (tmp_path / "hostile_provider.py").write_text(HOSTILE)
    info = tmp_path / "hostile_provider-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-provider\nVersion: 0.1\n")
    entries = "grumpy = hostile_provider:SPEC\nghost = hostile_provider:MISSING\n"
    (info / "entry_points.txt").write_text(f"[slotmagic.providers]\n{entries}")
    done = subprocess.run(
        [sys.executable, "-c", LOAD, "grumpy:x", "ghost:x"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            "PYTHONPATH": f"{tmp_path}:{ROOT}",
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "HOSTILE_MODE": mode,
            "OPENAI_API_KEY": KEY,
            "SLOTMAGIC_DB": ":memory:",
        },
        timeout=120,
    )
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    assert "loaded: True" in done.stdout  # %load_ext went on
    assert KEY not in shown and KEY[10:30] not in shown
    assert "Traceback" not in shown
    turns = [line for line in done.stdout.splitlines() if line.startswith("turn:")]
    if mode in ("exit", "interrupt", "leak"):  # the module fails at import: neither is registered
        kind = {"exit": "SystemExit", "interrupt": "KeyboardInterrupt", "leak": "RuntimeError"}[mode]
        warnings = [line for line in done.stderr.splitlines() if "was not registered" in line]
        assert len(warnings) == 2 and all(f": {kind}" in w for w in warnings), done.stderr
        assert all("unknown provider" in t for t in turns)
        return
    made = "SystemExit: 3" if mode == "construct-exit" else "RuntimeError: no connection for [redacted]"
    assert turns == [
        "turn: UsageError provider 'grumpy' (plugin hostile-provider, hostile_provider:SPEC) could not be made: "
        f"{made}; fix or reinstall the package, or use another model",
        "turn: UsageError provider 'ghost' (plugin hostile-provider, hostile_provider:MISSING) could not be made: "
        "ModuleNotFoundError: No module named 'no_such_module_anywhere'; fix or reinstall the package, "
        "or use another model",
    ]
