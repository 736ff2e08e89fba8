"""The documentation site (docs/, Sphinx with MyST-NB) builds with warnings as errors, and every
link in it leads somewhere: each relative link to a built file, each #fragment to an id on its
page. Checked offline: external links are not fetched (Sphinx's linkcheck builder would need the
network), but must be https and are listed where a link fails.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import ROOT
from tools.tutorials import tutorials as tracked_tutorials

LINK = re.compile(r"""<(?:a|link|img|script)\b[^>]*?\b(?:href|src)=["']([^"']+)["']""", re.I)
ID = re.compile(r"""\bid=["']([^"']+)["']""")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "html"
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return out


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)


@pytest.mark.slow
def test_every_link_leads_somewhere(site: Path) -> None:
    ids: dict[Path, set[str]] = {}
    broken, external = [], set()
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        for raw in LINK.findall(text):
            url = html.unescape(raw)
            parts = urlsplit(url)
            if parts.scheme in ("http", "https", "mailto"):
                external.add(url)
                if parts.scheme == "http":
                    broken.append(f"{page.relative_to(site)}: {url} (not https)")
                continue
            if url.startswith("data:image/"):
                continue  # an image inline (a turn's thumbnails), not a link
            if parts.scheme or url.startswith("//"):
                broken.append(f"{page.relative_to(site)}: {url} (unknown scheme)")
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {url} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = set(ID.findall(target.read_text(encoding="utf-8")))
                if unquote(parts.fragment) not in ids[target]:
                    broken.append(f"{page.relative_to(site)}: {url} (no such anchor)")
    assert not broken, "\n".join(broken) + "\n\nexternal links: " + ", ".join(sorted(external))


@pytest.mark.slow
def test_the_pages_hold_what_a_newcomer_needs(site: Path) -> None:
    names = {p.relative_to(site).as_posix() for p in pages(site)}
    tutorials = sorted(p.stem for p in tracked_tutorials())
    assert {f"tutorials/{t}.html" for t in tutorials} <= names
    assert {"guarantees.html", "reference/api.html", "reference/configuration.html", "install.html"} <= names
    text = {name: (site / name).read_text(encoding="utf-8") for name in names}
    # No internal labels a reader cannot decode.
    for name, page in text.items():
        assert not re.search(r"seed T\d|\bissue \d+", page), name
    # The tutorials with their outputs; widgets as their static forms, no widget script.
    budgets = text["tutorials/03-budgets-and-compaction.html"]
    assert "slotmagic-static" in budgets and "slot lease-review · echo" in budgets
    assert "widget-view+json" not in budgets and "unpkg.com" not in budgets
    # The API reference from docstrings, the settings from the traitlets.
    assert 'id="slotmagic.Session.submit_turn"' in text["reference/api.html"]
    settings = text["reference/configuration.html"]
    for name in ("model", "db_path", "stream_throttle", "max_concurrency", "openai_base_url"):
        assert f'<code class="docutils literal notranslate"><span class="pre">{name}</span></code>' in settings
    assert "SLOTMAGIC_STREAM_THROTTLE" in settings and "SLOTMAGIC_READ_TIMEOUT" in settings
    assert "Env: " not in settings  # said once, as the variable


FITS = """(selector) => [...document.querySelectorAll(selector)]
    .filter((el) => el.scrollWidth > el.clientWidth + 1)
    .map((el) => `${el.scrollWidth} > ${el.clientWidth} px: ${el.textContent.trim().slice(0, 80)}`)"""


@pytest.mark.slow
@pytest.mark.browser
def test_the_guide_and_the_tutorials_outputs_fit_the_column_at_1280_px(site: Path) -> None:
    """The guide's code blocks (its cheat sheets) fit the column of a 1280 px window, and the
    tutorials' outputs, widgets' static forms included, wrap there rather than scroll."""
    chromium = Path("/usr/bin/chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not chromium.exists():
        if os.environ.get("SLOTMAGIC_REQUIRE_BROWSER"):
            pytest.fail("Debian's chromium and playwright are needed: apt-get install chromium")
        pytest.skip("Debian's chromium and playwright are needed: apt-get install chromium")
    checks = [(p, "article pre") for p in sorted((site / "guide").glob("*.html"))]
    checks += [(site / "install.html", "article pre")]
    checks += [(p, ".cell_output pre, .slotmagic-static *") for p in sorted((site / "tutorials").glob("*.html"))]
    over = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for html_page, selector in checks:
            page.goto(html_page.as_uri())
            assert page.evaluate("document.querySelectorAll('article').length") == 1
            over += [f"{html_page.relative_to(site)}: {found}" for found in page.evaluate(FITS, selector)]
        page.goto((site / "tutorials" / "05-working-context-and-workflow.html").as_uri())
        statics = page.evaluate("document.querySelectorAll('.slotmagic-static pre.slotmagic-workflow').length")
        browser.close()
    assert statics > 0  # the workflow's static form is among what was checked
    assert not over, "\n".join(over)
