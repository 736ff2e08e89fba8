"""In a real JupyterLab: a reply from a (scripted) OpenAI-compatible server streams into the
cell's output, rendered as Markdown, before it is complete, and ends with its footer."""

from __future__ import annotations

from typing import Any

import pytest

from tests.providers.wire_server import WireServer, oa_paced_text_stream

from .actions import write_notebook

pytestmark = [pytest.mark.slow, pytest.mark.browser]

FAKE_KEY = "sk-test-not-a-real-key"


def test_a_slow_reply_is_shown_while_it_streams(lab: Any, page: Any) -> None:
    wire = WireServer()
    pieces = ["**Once** upon a time", ", a tenant", " asked", " for", " the", " deposit", " back.", " The end."]
    wire.script(oa_paced_text_stream(*pieces, pause=0.4))  # each event its own HTTP chunk
    write_notebook(
        lab.root / "story.ipynb",
        "%load_ext slotmagic",
        f'import os\nos.environ["OPENAI_API_KEY"] = "{FAKE_KEY}"',
        f'%config SlotMagic.openai_base_url = "{wire.url}/v1"',
        "%%turn --model openai:gpt-4o-mini\nTell me a short story.",
    )
    try:
        page.goto(lab.tree_url("story.ipynb"))
        page.locator(".jp-StatusBar-TextItem:has-text('Idle')").first.wait_for()
        page.locator(".jp-Notebook").click()
        page.keyboard.press("Escape")
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_text("Run All Cells", exact=True).click()

        turn_cell = page.locator(".jp-Notebook .jp-Cell").nth(3)
        output = turn_cell.locator(".jp-OutputArea-output")  # HTML rendered from the reply's Markdown
        output.get_by_text("a tenant", exact=False).wait_for(timeout=30_000)
        partial = output.inner_text()
        assert "The end." not in partial  # shown before the reply was complete
        assert output.locator("strong", has_text="Once").count() == 1  # rendered as Markdown
        page.screenshot(path=str(lab.root.parent / "streaming.png"))

        turn_cell.get_by_text("slot default · turn 1", exact=False).wait_for(timeout=30_000)
        final = output.inner_text()
        assert "Once upon a time, a tenant asked for the deposit back. The end." in final
        assert FAKE_KEY not in final
        assert "openai:gpt-4o-mini · <$0.0001" in final  # priced, and too cheap to round to 0
        assert len(wire.requests) == 1 and wire.requests[0].path == "/v1/chat/completions"
    finally:
        wire.close()
