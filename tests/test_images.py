"""Images as structured content: the file header read, the parts of a message, the providers'
image-token rules against their documented examples, which models take images, and images kept
by both stores (a SQLite file and a PostgreSQL schema: the store contract), exported and
diffed."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image as PILImage

from slotmagic import Session
from slotmagic._core.images import Image, TextPart, anthropic_image_tokens, image_info
from slotmagic._core.messages import Message
from slotmagic._core.vision import takes_images
from slotmagic._errors import ConfigError
from slotmagic.tokens import TokenCounter
from slotmagic.tokens._images import image_tokens, openai_patch_tokens, openai_tile_tokens


def picture(width: int, height: int, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (width, height), (10, 120, 200)).save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.fixture
def db_path(store_target: str) -> str:
    return store_target


@pytest.mark.parametrize(("fmt", "media_type"), [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
                                                 ("WEBP", "image/webp")])  # fmt: skip
def test_the_size_and_type_are_read_from_the_file(fmt: str, media_type: str) -> None:
    assert image_info(picture(321, 123, fmt)) == (media_type, 321, 123)


def test_what_is_not_an_image_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="PNG, JPEG, GIF and WebP"):
        Image.from_bytes(b"%PDF-1.7 not a picture")


def test_a_message_reads_as_text_and_images_in_order() -> None:
    image = Image.from_bytes(picture(10, 20), label="fig")
    message = Message.from_parts("user", ["before ", image, " after"])
    assert message.content == "before  after" and message.images[0].at == len("before ")
    assert message.parts == [TextPart("before "), message.images[0], TextPart(" after")]
    assert Message.from_dict(message.to_dict()) == message
    with pytest.raises(ConfigError, match="only user messages carry images"):
        Message("assistant", "x", images=(image,))


# -- the providers' documented examples ---------------------------------------------------------


def test_openai_tiles_match_the_documented_examples() -> None:
    # https://platform.openai.com/docs/guides/images-vision#calculating-costs (gpt-4o)
    assert openai_tile_tokens(1024, 1024) == 765  # 4 tiles: 85 + 4 * 170
    assert openai_tile_tokens(2048, 4096) == 1105  # 1024x2048 -> 768x1536: 6 tiles
    assert openai_tile_tokens(512, 512) == 255  # one tile, never scaled up


def test_openai_patches_match_the_documented_examples() -> None:
    assert openai_patch_tokens(1024, 1024) == 1024
    assert openai_patch_tokens(1800, 2400) == 1452  # scaled to 1056x1408


def test_anthropic_matches_the_documented_table() -> None:
    # https://docs.anthropic.com/en/docs/build-with-claude/vision (tokens = width * height / 750)
    assert anthropic_image_tokens(200, 200) == 54
    assert anthropic_image_tokens(1000, 1000) == 1334
    assert anthropic_image_tokens(1092, 1092) == 1590
    assert anthropic_image_tokens(4000, 4000) == anthropic_image_tokens(1092, 1092) + 10  # resized to ~1,600


def test_each_model_counts_an_image_by_its_providers_rule() -> None:
    image = Image.from_bytes(picture(1024, 1024))
    assert image_tokens("openai:gpt-4o", image) == 765
    assert image_tokens("openai:gpt-4o-mini", image) == 2833 + 4 * 5667
    assert image_tokens("openai:gpt-4.1-mini", image) == 1659  # 1,024 patches x 1.62
    assert image_tokens("anthropic:claude-sonnet-4-5", image) == 1399
    assert image_tokens("openai:gpt-3.5-turbo", image) == 0  # it is sent the label only
    message = Message.from_parts("user", ["Look:", image])
    text_only = Message.user("Look:")
    for model, expected in (("openai:gpt-4o", 765), ("anthropic:claude-sonnet-4-5", 1399), ("echo", 1399)):
        counter = TokenCounter.for_model(model)
        assert counter.count_message(message) - counter.count_message(text_only) == expected, model


def test_which_models_take_images() -> None:
    for model in ("openai:gpt-4o", "openai:gpt-5", "anthropic:claude-3-haiku-20240307", "ollama:llava:13b",
                  "ollama:gemma3:4b", "echo", "openai:my-server-model"):  # fmt: skip
        assert takes_images(model), model
    for model in (
        "openai:gpt-3.5-turbo",
        "openai:o3-mini",
        "anthropic:claude-2.1",
        "ollama:llama3.2",
        "ollama:gemma3:1b",
    ):
        assert not takes_images(model), model


def test_the_budget_counts_the_image(tmp_path: Path) -> None:
    with Session.open("b", db_path=tmp_path / "s.db", model="openai:gpt-4o") as session:
        session.append([Message.user("hi")])
        before = session.budget().report.history.used
        session.append([Message.from_parts("user", ["Look:", Image.from_bytes(picture(1024, 1024))])])
        after = session.budget().report.history.used
    assert after - before >= 765


# -- stored, exported, diffed (each store) ------------------------------------------------------------


def test_images_are_stored_exported_and_diffed(db_path: str, tmp_path: Path) -> None:
    raw = picture(40, 30)
    with Session.open("st", db_path=db_path) as session:
        session.submit_turn("Here:", attachments={"pic": raw})
        session.derive_slot("other")
        session.submit_turn("No picture here.", slot="other")
    with Session.open("st", db_path=db_path) as session:  # read back by a new connection
        stored = session.messages()[0]
        assert stored.images[0].raw == raw and stored.images[0].label == "pic"
        assert "image pic (image/png 40x30" in session.messages()[1].content  # echo saw the image part
        (tmp_path / "out").mkdir()  # an export writes into a folder that is there
        markdown = session.history.export(tmp_path / "out" / "chat.md")
        data = json.loads(session.history.export(tmp_path / "out" / "chat.json").read_text())
        diff = session.history.diff("other", "default").to_text()
    text = markdown.read_text()
    name = f"chat_files/image-{stored.images[0].digest}.png"
    assert f"![pic]({name})" in text
    assert (tmp_path / "out" / name).read_bytes() == raw
    assert data["messages"][0]["images"][0]["url"] == "data:image/png;base64," + base64.b64encode(raw).decode()
    assert "[+1 image]" not in diff  # the image turn is shared
    with Session.open("st", db_path=db_path) as session:
        session.submit_turn("Another:", attachments={"pic": raw}, slot="other")
        assert "[+1 image]" in session.history.diff("other", "default").to_text()


def test_models_sharing_an_encoding_never_share_an_images_count(tmp_path: Path) -> None:
    """gpt-4o and gpt-4o-mini count text alike (o200k_base) but an image differently: the
    counts kept in the store for one are not read for the other."""
    with Session.open("keys", db_path=tmp_path / "s.db") as session:
        session.append([Message.from_parts("user", ["Look:", Image.from_bytes(picture(1024, 1024))])])
        big = session.preview(model="openai:gpt-4o").report.history.used
        mini = session.preview(model="openai:gpt-4o-mini").report.history.used
        none = session.preview(model="openai:gpt-3.5-turbo").report.history.used
        again = session.preview(model="openai:gpt-4o").report.history.used
    assert mini - big == (2833 + 4 * 5667) - 765
    assert big == again and none < 20
