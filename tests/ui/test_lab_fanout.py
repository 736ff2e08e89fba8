"""In a real JupyterLab: ``%%turn --slots a,b,c`` streams three replies from a (scripted)
OpenAI-compatible server into three columns side by side, before any of them is complete, and
ends with each column's facts and the summary line. Screenshots in tests/ui/artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.providers.wire_server import WireServer, oa_paced_text_stream

from .actions import write_notebook

pytestmark = [pytest.mark.slow, pytest.mark.browser]

FAKE_KEY = "sk-test-not-a-real-key"
SLOTS = ("alpha", "beta", "gamma")
COLUMNS = ".sm-fanout .sm-column"


def slow_story(slot: str) -> list[object]:
    pieces = [f"{slot} begins.", " One", " two", " three", " four", " five", " six", f" **{slot} ends.**"]
    if slot == "gamma":  # markup a model might send: shown as text, never run
        pieces[-1] += " <img src=x onerror=\"document.title='pwned'\"> [click](javascript:alert(1))"
    return oa_paced_text_stream(*pieces, pause=0.4)


def test_three_columns_stream_side_by_side(lab: Any, page: Any, artifacts: Path) -> None:
    wire = WireServer()
    for slot in SLOTS:
        wire.route(f"You are {slot}.", slow_story(slot))
    write_notebook(
        lab.root / "fanout.ipynb",
        "%load_ext slotmagic",
        f'import os\nos.environ["OPENAI_API_KEY"] = "{FAKE_KEY}"',
        f'%config SlotMagic.openai_base_url = "{wire.url}/v1"\n'
        '%config SlotMagic.model = "openai:gpt-4o-mini"\n'
        "%config SlotMagic.stream_throttle = 0.1",
        "from slotmagic import SlotConfig, current_session\n"
        "for slot in ('alpha', 'beta', 'gamma'):\n"
        "    current_session().create_slot(slot, SlotConfig(system=f'You are {slot}.'), exist_ok=True)",
        "%%turn --slots alpha,beta,gamma\nTell me a short story.",
    )
    try:
        page.goto(lab.tree_url("fanout.ipynb"))
        page.locator(".jp-StatusBar-TextItem:has-text('Idle')").first.wait_for()
        page.locator(".jp-Notebook").click()
        page.keyboard.press("Escape")
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_text("Run All Cells", exact=True).click()

        cell = page.locator(".jp-Notebook .jp-Cell").nth(4)
        columns = cell.locator(COLUMNS)
        # All three streaming at once, each with part of its reply.
        page.wait_for_function(
            f"""() => {{
                const cols = [...document.querySelectorAll('{COLUMNS}')];
                return cols.length === 3 && cols.every(c => c.dataset.status === 'streaming'
                    && c.querySelector('.sm-column-text').textContent.includes('One'));
            }}""",
            timeout=30_000,
        )
        partial = [columns.nth(i).inner_text() for i in range(3)]
        cell.screenshot(path=str(artifacts / "1-streaming.png"))
        for slot, text in zip(SLOTS, partial, strict=True):
            assert f"{slot} begins." in text and f"{slot} ends." not in text
        assert columns.locator(".sm-column-text.sm-markdown p").count() == 3  # Markdown while it streams
        # Measured in the page in one go: while it streams a column can be drawn again between two
        # calls, and a locator's bounding_box() is None for the moment it is not attached.
        boxes = columns.evaluate_all("cols => cols.map(c => c.getBoundingClientRect().toJSON())")
        assert len(boxes) == 3
        assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"]  # side by side
        assert abs(boxes[0]["y"] - boxes[2]["y"]) < 2

        cell.locator(".sm-fanout .sm-summary", has_text="3 of 3 replies").wait_for(timeout=30_000)
        cell.screenshot(path=str(artifacts / "2-done.png"))
        for i, slot in enumerate(SLOTS):
            text = columns.nth(i).inner_text()
            assert f"{slot} begins. One two three four five six {slot} ends." in text
            # Replies read as Markdown, as a single %%turn's do.
            assert columns.nth(i).locator(".sm-markdown strong").inner_text() == f"{slot} ends."
            assert f"slot {slot}, turn 1" in text and "12 in / 5 out" in text and "openai:gpt-4o-mini" in text
        gamma = columns.nth(2)
        assert "<img src=x onerror=" in gamma.inner_text() and gamma.locator(".sm-column-text img").count() == 0
        assert gamma.locator("a").count() == 0 and "[click](javascript:alert(1))" in gamma.inner_text()
        assert page.title() != "pwned"
        summary = cell.locator(".sm-fanout .sm-summary").inner_text()
        assert "slowest" in summary and "fastest" in summary and "total cost" in summary
        assert FAKE_KEY not in cell.inner_text()
        arrivals = sorted(r.at for r in wire.requests)
        assert len(arrivals) == 3 and arrivals[-1] - arrivals[0] < 1.0  # asked at once, not in turn
    finally:
        wire.close()
