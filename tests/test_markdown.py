"""Replies as Markdown in the fan-out columns: rendered, and never markup of the model's own.
Any text renders to HTML made only of Markdown's tags, with no event handler, no script and no
link or image a browser would run."""

from __future__ import annotations

from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from slotmagic.columns import column_data, columns_html
from slotmagic.markdown import reply_html

# What CommonMark with tables and strikethrough can make, and nothing else.
TAGS = {
    "p", "em", "strong", "s", "code", "pre", "a", "img", "ul", "ol", "li", "blockquote", "hr", "br",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ATTRIBUTES = {"href", "src", "alt", "title", "class", "start", "style", "target", "rel"}
SAFE_URL = ("http:", "https:", "mailto:", "data:image/", "#", "/", ".")
# Table alignment (Markdown), and the static form's own layout (columns_html).
STYLES = {f"text-align:{a}" for a in ("left", "right", "center")} | {
    "text-align:left;vertical-align:top",
    "white-space:pre-wrap;text-align:left",
}


class Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS:
            self.problems.append(f"tag {tag}")
        for name, value in attrs:
            if name not in ATTRIBUTES:
                self.problems.append(f"attribute {name}")
            scheme = value is not None and ":" in value.split("/")[0]
            if name in ("href", "src") and scheme and not str(value).lower().startswith(SAFE_URL):
                self.problems.append(f"{name}={value}")
            if name == "style" and value not in STYLES:
                self.problems.append(f"style={value}")


def problems(html: str) -> list[str]:
    checker = Checker()
    checker.feed(html)
    checker.close()
    return checker.problems


ATTACKS = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[a](javascript:alert(1))",
    "[a](JaVaScRiPt:alert(1))",
    "[a](vbscript:msgbox)",
    "![i](data:text/html;base64,PHNjcmlwdD4=)",
    "<a href='javascript:alert(1)'>x</a>",
    '<svg onload="alert(1)">',
    "[a](java\tscript:alert(1))",
    "<iframe src=//evil>",
    '`<b onmouseover="x">`',
]


def test_replies_render_as_markdown() -> None:
    html = reply_html("**Deposit:** $1,250\n\n- keep the receipt\n- write *today*\n\n```\nletter()\n```")
    assert "<strong>Deposit:</strong>" in html and "<li>write <em>today</em></li>" in html
    assert "<pre><code>letter()\n</code></pre>" in html
    link = reply_html("[the statute](https://example.org/law)")
    assert '<a href="https://example.org/law" target="_blank" rel="noopener noreferrer">the statute</a>' in link
    table = reply_html("| step | when |\n|---|---|\n| letter | now |")
    assert "<td>letter</td>" in table
    assert reply_html("") == ""


def test_markup_in_a_reply_is_shown_as_text() -> None:
    for attack in ATTACKS:
        html = reply_html(f"before {attack} after")
        assert problems(html) == [], (attack, html)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [*ATTACKS, "**", "*", "`", "[", "](", ")", "<", ">", "\n", "\n\n", "|", "---", "> ", "# ", "x"]
        ),
        max_size=30,
    ).map("".join)
    | st.text(max_size=300)
)
def test_any_reply_renders_to_safe_html(text: str) -> None:
    assert problems(reply_html(text)) == []


def test_columns_carry_the_html_and_the_static_form_uses_it() -> None:
    column = column_data("a", "a", "echo", "done", text="**yes** <img src=x onerror=alert(1)>")
    assert column["html"] == "<p><strong>yes</strong> &lt;img src=x onerror=alert(1)&gt;</p>\n"
    table = columns_html([column], "1 of 1 replies")
    assert "<strong>yes</strong>" in table and problems(table) == []
    failed = column_data("b", "b", "echo", "failed")
    failed["error"] = "HTTP 500 <b>"
    table = columns_html([failed], "0 of 1 replies")
    assert "failed: HTTP 500 &lt;b&gt;" in table and problems(table) == []
