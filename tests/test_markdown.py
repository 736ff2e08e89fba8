"""Replies as Markdown, in a ``%%turn`` output, a displayed ``Reply`` and the fan-out columns:
rendered, and never markup of the model's own. Any text renders to HTML made only of
Markdown's tags, with no event handler, no script and no link or image a browser would run;
and what a notebook front end is handed holds no Markdown a renderer passing raw HTML (as
JupyterLab's does for the outputs it trusts) could make live."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from slotmagic._columns import column_data, columns_html
from slotmagic._engine.run.loop import ToolStep
from slotmagic._magics.display import bundle
from slotmagic._markdown import reply_html

# What CommonMark with tables and strikethrough can make, and nothing else.
TAGS = {
    "p", "em", "strong", "s", "code", "pre", "a", "img", "ul", "ol", "li", "blockquote", "hr", "br",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ATTRIBUTES = {"href", "src", "alt", "title", "class", "start", "style", "target", "rel"}
SAFE_SCHEMES = {"http", "https", "mailto"}
# Table alignment (Markdown), and the static form's own layout (columns_html).
STYLES = {f"text-align:{a}" for a in ("left", "right", "center")} | {
    "text-align:left;vertical-align:top",
    "white-space:pre-wrap;text-align:left",
}


class Checker(HTMLParser):
    def __init__(self, tags: set[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.tags = tags
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.tags:
            self.problems.append(f"tag {tag}")
        for name, value in attrs:
            if name not in ATTRIBUTES:
                self.problems.append(f"attribute {name}")
            if name in ("href", "src") and not safe_url(value or ""):
                self.problems.append(f"{name}={value}")
            if name == "style" and value not in STYLES:
                self.problems.append(f"style={value}")


def scheme(url: str) -> str | None:
    """The scheme a browser would see in ``url`` (entities already decoded): after it drops
    leading and trailing spaces and controls, and tabs and newlines anywhere (WHATWG URL);
    None for a relative URL. ``%5Ba%5D(javascript:…`` has none: a scheme is a letter, then
    letters, digits, ``+``, ``-`` or ``.``, then a colon."""
    url = re.sub(r"[\t\n\r]", "", url.strip("".join(map(chr, range(33)))))
    found = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", url)
    return found[1].lower() if found else None


def safe_url(url: str) -> bool:
    found = scheme(url)
    return found is None or found in SAFE_SCHEMES or (found == "data" and url.strip().lower().startswith("data:image/"))


def test_the_oracle_reads_schemes_as_a_browser_does() -> None:
    assert not safe_url("javascript:alert(1)") and not safe_url(" \x01JaVa\tScRiPt:alert(1)")
    assert not safe_url("vbscript:x") and not safe_url("data:text/html,x") and not safe_url("file:///etc")
    assert safe_url("https://example.org") and safe_url("/a:b") and safe_url("#x") and safe_url("data:image/png,x")
    # hypothesis found this one: markdown-it makes a harmless relative link of it
    assert safe_url("%5Ba%5D(javascript:alert(1))")
    assert problems(reply_html("[]([a](javascript:alert(1)))")) == []


def problems(html: str, tags: set[str] = TAGS) -> list[str]:
    checker = Checker(tags)
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
    # What a per-line guess at code spans let through in %%turn outputs (issue 26)
    "\\`<img src=x onerror=alert(1)>`",
    "``<img src=x onerror=alert(1)>`",
    "`\na` <img src=x onerror=alert(1)> `b",
    "[a](<javascript:alert(1)>)",
    "<javascript:alert(1)>",
    "[a]: javascript:alert(1)\n\n[a]",
    "![i](javascript:alert(1))",
    "$<img src=x onerror=alert(1)>$",
    "\\(<script>alert(1)</script>\\)",
    "$$</p><img src=x onerror=alert(1)>$$",
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


# What JupyterLab does with the Markdown of an output it trusts: raw HTML passed through.
RAW_HTML_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def as_a_front_end_shows(data: dict[str, Any]) -> list[str]:
    """The HTML a notebook front end would put in the page for each rich form of an output:
    Markdown rendered with raw HTML passed through (JupyterLab, for an output it trusts), HTML
    as it is."""
    shown = [RAW_HTML_MARKDOWN.render(data["text/markdown"])] if "text/markdown" in data else []
    return [*shown, *([data["text/html"]] if "text/html" in data else [])]


REPLIES = st.lists(
    st.sampled_from(
        [*ATTACKS, "**", "*", "`", "``", "\\", "[", "](", ")", "<", ">", "\n", "\n\n", "|", "---", "> ", "# ",
         "$", "$$", "\\(", "\\)", "&", '"', "'", "x", "    ", "- ", "1. ", "```", "~~~", "<!--", "\r"]
    ),
    max_size=30,
).map("".join) | st.text(max_size=300)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(REPLIES, REPLIES, st.booleans(), st.text(max_size=40))
def test_a_turn_output_shows_no_live_markup_from_any_reply(text: str, result: str, error: bool, line: str) -> None:
    """A %%turn output (a tool call and its result, the reply, the footer), as any front end
    renders it, holds only Markdown's tags and safe links: the reply's own markup is text."""
    data = bundle(text, f"slot default · {line}", [ToolStep("fetch", result[:60], result, error)])
    shown = as_a_front_end_shows(data)
    assert shown, data
    for page in shown:
        assert problems(page, TAGS | {"details", "summary"}) == []  # a tool call folds its result


def test_the_old_markdown_form_was_live_in_jupyterlab() -> None:
    """The oracle above sees what the issue saw: a reply's Markdown, handed to JupyterLab, runs."""
    for text in ("\\`<img src=x onerror=alert(1)>`", "`\na` <img src=x onerror=alert(1)> `b"):
        assert problems(RAW_HTML_MARKDOWN.render(text)) != []
        assert problems(as_a_front_end_shows(bundle(text, "footer"))[0]) == []


def test_a_reply_displayed_in_a_notebook_is_rendered_html(ip: Any) -> None:
    ip.run_cell("%load_ext slotmagic")
    ip.run_cell("%%turn\nSay <img src=x onerror=alert(1)>")
    reply = ip.user_ns["_"]
    data, _ = ip.display_formatter.format(reply)
    assert "text/markdown" not in data
    assert "&lt;img src=x onerror=alert(1)&gt;" in data["text/html"] and problems(data["text/html"]) == []


def test_tex_is_left_for_mathjax() -> None:
    html = reply_html("Let $x_1 * y_2$ and \\(a_{1} \\{b\\}\\) and\n\n$$\na \\\\ b_2 < c\n$$\n\n$5 and *$6*")
    assert "$x_1 * y_2$" in html and "\\(a_{1} \\{b\\}\\)" in html and "$$\na \\\\ b_2 &lt; c\n$$" in html
    assert "$5 and <em>$6</em>" in html  # money is not math
    env = reply_html("\\begin{pmatrix} a_1 & b_1 \\\\ c & d \\end{pmatrix}")
    assert env == "<p>\\begin{pmatrix} a_1 &amp; b_1 \\\\ c &amp; d \\end{pmatrix}</p>\n"


def test_columns_carry_the_html_and_the_static_form_uses_it() -> None:
    column = column_data("a", "a", "echo", "done", text="**yes** <img src=x onerror=alert(1)>")
    assert column["html"] == "<p><strong>yes</strong> &lt;img src=x onerror=alert(1)&gt;</p>\n"
    table = columns_html([column], "1 of 1 replies")
    assert "<strong>yes</strong>" in table and problems(table) == []
    failed = column_data("b", "b", "echo", "failed")
    failed["error"] = "HTTP 500 <b>"
    table = columns_html([failed], "0 of 1 replies")
    assert "failed: HTTP 500 &lt;b&gt;" in table and problems(table) == []
