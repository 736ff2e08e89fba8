"""Images within each provider's documented limits, in the request bodies a loopback server
receives: Anthropic's 8,000 px a side, 5 MB an image, 2,000 px a side when a request holds more
than 20 images and 100 images a request; OpenAI's 500 images and 50 MB a request. An image over
a limit is downscaled with its aspect kept (its dimensions read back from the body), one at the
limit goes as it is; over the count a turn is refused in one line and nothing is sent. The
preview and the budget show the image as it will be sent."""

from __future__ import annotations

import base64
import io
import os
import sys
from pathlib import Path

import pytest
from PIL import Image as PILImage

from slotmagic import Session
from slotmagic._core.images import Image
from slotmagic._errors import ConfigError
from slotmagic.providers import ProviderSettings
from slotmagic.providers import _image_limits as limits
from slotmagic.tokens import image_tokens

from .wire_server import WireServer, an_text_stream, oa_text_stream, sse_response

ANTHROPIC, OPENAI = "anthropic:claude-sonnet-4-5", "openai:gpt-4.1"


def png(width: int, height: int, noise: bool = False) -> bytes:
    buffer = io.BytesIO()
    if noise:
        picture = PILImage.frombytes("RGB", (width, height), os.urandom(width * height * 3))
    else:
        picture = PILImage.new("RGB", (width, height), (200, 30, 30))
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def sent_images(body: dict) -> list[tuple[int, int, int]]:  # type: ignore[type-arg]
    """(width, height, base64 length) of every image in a request body, decoded."""
    found = []
    for message in body["messages"]:
        content = message["content"]
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image":
                data = part["source"]["data"]
            elif part.get("type") == "image_url":
                data = part["image_url"]["url"].split(",", 1)[1]
            else:
                continue
            with PILImage.open(io.BytesIO(base64.b64decode(data))) as opened:
                found.append((*opened.size, len(data)))
    return found


def turn(wire: WireServer, settings: ProviderSettings, tmp_path: Path, model: str, pictures: dict[str, bytes]) -> dict:  # type: ignore[type-arg]
    wire.script(sse_response(an_text_stream("Seen.") if model.startswith("anthropic:") else oa_text_stream("Seen.")))
    with Session.open("img", db_path=tmp_path / "s.db", model=model, settings=settings) as session:
        session.submit_turn("What are these?", attachments=pictures)
    [request] = wire.requests
    return request.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("width", "height", "expected"), [(9_000, 40, (8_000, 35)), (40, 9_000, (35, 8_000)), (8_000, 40, (8_000, 40))]
)
def test_anthropic_pixels_a_side(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path, width: int, height: int, expected: tuple[int, int]
) -> None:
    body = turn(wire, settings, tmp_path, ANTHROPIC, {"wide": png(width, height)})
    [(w, h, _)] = sent_images(body)
    assert (w, h) == expected


def test_anthropic_five_megabytes_an_image(wire: WireServer, settings: ProviderSettings, tmp_path: Path) -> None:
    raw = png(1_450, 1_450, noise=True)
    assert len(raw) > 6_000_000
    body = turn(wire, settings, tmp_path, ANTHROPIC, {"photo": raw})
    [(w, h, size)] = sent_images(body)
    assert size <= 5 * 1024 * 1024 and w == h and w < 1_450  # smaller, the aspect kept


@pytest.mark.parametrize(("count", "side"), [(20, 2_100), (21, 2_000)])
def test_anthropic_many_images_take_2000_px(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path, count: int, side: int
) -> None:
    pictures = {f"p{i}": png(2_100, 1_050) for i in range(count)}
    body = turn(wire, settings, tmp_path, ANTHROPIC, pictures)
    sent = sent_images(body)
    assert len(sent) == count and {(w, h) for w, h, _ in sent} == {(side, side // 2)}


def test_openai_takes_many_large_images_as_they_are(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path
) -> None:
    body = turn(wire, settings, tmp_path, OPENAI, {f"p{i}": png(2_100, 1_050) for i in range(21)})
    assert {(w, h) for w, h, _ in sent_images(body)} == {(2_100, 1_050)}


@pytest.mark.parametrize(("model", "most"), [(ANTHROPIC, 100), (OPENAI, 500)])
def test_over_the_count_is_refused_before_anything_is_sent(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path, model: str, most: int
) -> None:
    small = png(8, 8)
    with Session.open("img", db_path=tmp_path / "s.db", model=model, settings=settings) as session:
        with pytest.raises(
            ConfigError, match=rf"carry {most + 1:,} images; .* at most {most:,} in one request"
        ) as caught:
            session.submit_turn("What are these?", attachments={f"p{i}": small for i in range(most + 1)})
        assert "\n" not in str(caught.value) and session.messages() == []
    assert wire.requests == []


def test_at_the_count_is_sent(wire: WireServer, settings: ProviderSettings, tmp_path: Path) -> None:
    body = turn(wire, settings, tmp_path, ANTHROPIC, {f"p{i}": png(8, 8) for i in range(100)})
    assert len(sent_images(body)) == 100


def test_the_preview_and_the_budget_show_the_image_as_sent(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path
) -> None:
    body = turn(wire, settings, tmp_path, ANTHROPIC, {"wide": png(9_000, 40)})
    with Session.open("img", db_path=tmp_path / "s.db", model=ANTHROPIC, settings=settings) as session:
        stored = session.messages()[0].images[0]
        assert (stored.width, stored.height) == (9_000, 40)  # the store keeps it whole
        [entry] = [e for e in session.preview().entries if e.message.images]
        image = entry.message.images[0]
        assert (image.width, image.height) == (8_000, 35) == sent_images(body)[0][:2]
        text_only = session.preview().entries[0].message.content
        assert entry.tokens >= image_tokens(ANTHROPIC, image) and text_only
        assert entry.tokens < image_tokens(ANTHROPIC, stored) + session.budget().report.history.used  # counted as sent


def test_without_pillow_an_image_over_a_limit_is_refused_in_one_line(
    wire: WireServer, settings: ProviderSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = png(9_000, 40)
    monkeypatch.setitem(sys.modules, "PIL", None)
    limits._fit.cache_clear()
    with Session.open("img", db_path=tmp_path / "s.db", model=ANTHROPIC, settings=settings) as session:
        with pytest.raises(
            ConfigError, match=r"`?wide`? \(9000x40, .* over what .*\(8,000 px a side, 5 MB;.*pip install pillow"
        ):
            session.submit_turn("What is it?", attachments={"wide": raw})
        assert session.messages() == []
    assert wire.requests == []
    limits._fit.cache_clear()


def test_fitting_keeps_the_aspect_and_is_done_once() -> None:
    image = Image.from_bytes(png(4_000, 3_000), label="x")
    fitted = limits.fitted(image, 2_000, None)
    assert fitted is not None and (fitted.width, fitted.height) == (2_000, 1_500)
    assert limits.fitted(image, 2_000, None) is fitted  # resampled once, then kept
    assert limits.fitted(image, 4_000, None) is image  # at the limit: as it is
