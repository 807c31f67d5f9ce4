"""The built site, as a reader sees it: every page opened in headless Chromium.

The site in site/ (built by `nox -s docs`, or here when it is missing) is served over HTTP
on a free port and every page is opened in Debian's `chromium`, driven by Playwright: no
console error and no failed request, every internal link and anchor resolves, every
Mermaid diagram is rendered to an SVG, and search finds "lease". Screenshots of the home
and concepts pages are saved in site/screenshots/.

Chromium comes from Debian's packages (`apt-get install chromium`; .ci/run installs it), never
from a browser download: without it this test skips, and fails when ``CI`` is set.
"""

from __future__ import annotations

import functools
import html
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import unquote, urldefrag, urlparse

import pytest
from markdown_blocks import REPO
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

if TYPE_CHECKING:
    from collections.abc import Iterator

SITE = REPO / "site"
SCREENSHOTS = SITE / "screenshots"
#: Chromium refuses its sandbox as root (the CI machine runs as root).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage"]
#: Material draws each diagram in a closed shadow root; opening it lets the test see the SVG.
OPEN_SHADOW_ROOTS = """
const attach = Element.prototype.attachShadow;
Element.prototype.attachShadow = function (init) {
  return attach.call(this, {...init, mode: "open"});
};
"""
_ID = re.compile(r'\bid="([^"]+)"')


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        reason = "Debian's chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    if not (SITE / "index.html").exists():
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"]
        subprocess.run(build, cwd=REPO, check=True, env=env)
    handler = functools.partial(_Quiet, directory=str(SITE))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def pages() -> list[str]:
    """Every page of the site, as its path under the site's root."""
    found = []
    for index in sorted(SITE.rglob("index.html")):
        relative = index.parent.relative_to(SITE).as_posix()
        if relative.startswith(("screenshots", "assets", "repository")):
            continue
        found.append("" if relative == "." else relative + "/")
    return found


@functools.cache
def ids_of(path: str) -> frozenset[str]:
    """The element ids of a page, as the built HTML has them."""
    target = SITE / path
    if target.is_dir() or not target.suffix:
        target = target / "index.html"
    return frozenset(html.unescape(v) for v in _ID.findall(target.read_text(encoding="utf-8")))


def open_page(browser: Browser, url: str) -> tuple[Page, list[str]]:
    """The page at ``url`` once it loaded, and every problem the browser reported."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on(
        "console",
        lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
    )
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    page.add_init_script(OPEN_SHADOW_ROOTS)
    page.goto(url, wait_until="load")
    return page, problems


def test_the_site_has_the_pages_of_the_nav(site_url: str) -> None:
    """The build holds the learning path's pages (a build that lost them fails here first)."""
    built = set(pages())
    for path in (
        "",
        "get-started/",
        "concepts/",
        "guides/",
        "stores/",
        "stores/sqlite/",
        "reference/api/",
        "reference/wire/",
        "cli/",
        "store-contract/",
    ):
        assert path in built


def test_every_page_opens_cleanly_with_its_links_and_diagrams(
    site_url: str, browser: Browser
) -> None:
    """Each page: no console error or failed request; each internal link reaches a page of
    the site and, with a fragment, an element of that page with that id; each Mermaid
    block became an SVG diagram (not mermaid's error picture)."""
    failures: list[str] = []
    checked_links = 0
    rendered = 0
    for path in pages():
        page, problems = open_page(browser, site_url + path)
        try:
            expected = (
                (SITE / path / "index.html").read_text(encoding="utf-8").count('class="mermaid"')
            )
            drawn = "() => [...document.querySelectorAll('div.mermaid')].filter(d => d.shadowRoot)"
            if expected:
                try:
                    page.wait_for_function(f"n => ({drawn})().length >= n", arg=expected)
                except PlaywrightTimeout:
                    failures.append(f"{path}: not every Mermaid block became a diagram")
            diagrams = page.evaluate(
                f"() => ({drawn})().map(d => d.shadowRoot.querySelector('svg')"
                "?.getAttribute('aria-roledescription'))"
            )
            failures += [
                f"{path}: a Mermaid block failed to render" for kind in diagrams if kind == "error"
            ]
            rendered += len(diagrams)
            links = page.evaluate(
                "() => [...document.querySelectorAll('a[href]')].map(a => a.href)"
            )
            for link in set(links):
                if not link.startswith(site_url):
                    continue
                target, fragment = urldefrag(link)
                target_path = unquote(urlparse(target).path).lstrip("/")
                on_disk = SITE / target_path
                if not (on_disk.is_file() or (on_disk / "index.html").is_file()):
                    failures.append(f"{path}: broken link {link}")
                    continue
                if fragment and unquote(fragment) not in ids_of(target_path):
                    failures.append(f"{path}: no anchor #{fragment} on {target_path or '/'}")
                checked_links += 1
            failures += [f"{path}: {problem}" for problem in problems]
        finally:
            page.close()
    assert not failures, "\n".join(failures)
    assert checked_links > 100
    assert rendered >= 5


def test_search_finds_lease(site_url: str, browser: Browser) -> None:
    """Typing "lease" in the search box lists results, the concepts page among them."""
    page, problems = open_page(browser, site_url)
    try:
        page.click("input.md-search__input")  # the search box, as a reader opens it
        page.locator("input.md-search__input").press_sequentially("lease", delay=50)
        results = page.locator(".md-search-result__item")
        results.first.wait_for(timeout=30_000)
        assert results.count() > 0
        links = page.evaluate(
            "() => [...document.querySelectorAll('.md-search-result__item a')].map(a => a.href)"
        )
        assert any("/concepts/" in link for link in links), links
        assert not problems, problems
    finally:
        page.close()


def test_screenshots_of_the_home_and_concepts_pages(site_url: str, browser: Browser) -> None:
    """The home page and the concepts page (its diagrams drawn) are saved as PNGs."""
    SCREENSHOTS.mkdir(exist_ok=True)
    for name, path in (("home", ""), ("concepts", "concepts/")):
        page, problems = open_page(browser, site_url + path)
        try:
            if path:
                page.wait_for_function(
                    "() => [...document.querySelectorAll('div.mermaid')]"
                    ".some(d => d.shadowRoot && d.shadowRoot.querySelector('svg'))",
                    timeout=30_000,
                )
            shot = SCREENSHOTS / f"{name}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            assert not problems, problems
        finally:
            page.close()
