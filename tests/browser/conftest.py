"""Fixtures of the browser tests: Debian's Chromium driven by Playwright, and the real demo.

The browser and the shared demo live for this package only (scope "package"), so the demo's
processes and Playwright's event loop are gone before the rest of the suite runs. The demo
that the read-only tests share fires its XID alert after 1 s; the tests that change an
incident start their own (`demo_of`, `tests/browser/demo.py`). Each page records its requests and
JavaScript errors: a page that fetches from anywhere but the console, or throws, fails.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Playwright, Request, expect, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from tests.browser import demo as demos
from tests.browser.console import snap
from tests.browser.demo import Demo
from tests.browser.viewing import DESKTOP, PHONE, Theme, Viewers

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 30_000

expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    demos.require(
        f"Chromium not found at {CHROMIUM}",
        os.access(CHROMIUM, os.X_OK),
        "apt-get install chromium; .ci/run does",
    )
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
    yield chromium
    chromium.close()


@pytest.fixture(scope="package")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """One demo for the tests that only look or get refused: its XID incident stays open."""
    demos.require_demo()
    with demos.running(tmp_path_factory.mktemp("demo"), delay="1s") as running:
        yield running


DemoOf = Callable[..., Demo]
"""(scenario, *, delay="1s") -> a demo of its own playing `scenario`, stopped after the test."""


@pytest.fixture
def demo_of(browser: Browser, tmp_path: Path) -> Iterator[DemoOf]:
    """Demos of the test's own, for tests that change their incident. Chromium is started
    first; the test's pages (`new_page`, asked for after this) close before a demo stops."""
    demos.require_demo()
    with contextlib.ExitStack() as stack:

        def start(scenario: str, *, delay: str = "1s") -> Demo:
            folder = tmp_path / scenario
            folder.mkdir()
            return stack.enter_context(demos.running(folder, scenario=scenario, delay=delay))

        yield start


@dataclass
class Watched:
    """What the pages of one test did that no test should allow."""

    origin: str
    foreign: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


NewPage = Callable[..., Page]
"""(demo, *, phone=False, javascript=True, theme=None) -> a page in a fresh browser context
(`theme` "light" or "dark": the `prefers-color-scheme` it reports; None: Playwright's light)."""


FAILED = pytest.StashKey[bool]()
"""Set on a test item whose call failed: its pages are photographed before they close."""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


@pytest.fixture
def new_page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[NewPage]:
    contexts = []
    pages: list[Page] = []
    watched: list[Watched] = []

    def make(
        demo: Demo, *, phone: bool = False, javascript: bool = True, theme: Theme | None = None
    ) -> Page:
        context = browser.new_context(
            **(PHONE if phone else DESKTOP),
            java_script_enabled=javascript,
            locale="en-US",
            color_scheme=theme,
        )
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        split = urlsplit(demo.url)
        seen = Watched(origin=f"{split.scheme}://{split.netloc}")
        watched.append(seen)
        page = context.new_page()

        def on_request(request: Request) -> None:
            split = urlsplit(request.url)
            origin = f"{split.scheme}://{split.netloc}"
            if split.scheme in ("http", "https", "ws", "wss") and origin != seen.origin:
                seen.foreign.append(request.url)

        page.on("request", on_request)
        page.on("pageerror", lambda error: seen.errors.append(f"{page.url}: {error.stack}"))
        pages.append(page)
        return page

    yield make
    if request.node.stash.get(FAILED, False):
        for n, page in enumerate(pages, 1):
            with contextlib.suppress(PlaywrightError):  # a crashed page has no picture
                snap(page, f"failed {request.node.name} {n}")
    for context in contexts:
        context.close()
    for seen in watched:
        assert seen.foreign == [], f"the console fetched from outside {seen.origin}"
        assert seen.errors == [], f"the console's JavaScript threw: {seen.errors}"


ViewersOf = Callable[..., Viewers]
"""(demo, *, user="oncall") -> that person's four views (phone/desktop x light/dark)."""


@pytest.fixture
def viewers(browser: Browser) -> Iterator[ViewersOf]:
    """The four viewing combinations as extra contexts on a demo the test already runs;
    closed after the test (ask for this fixture after `demo_of`, so they close first)."""
    made: list[Viewers] = []

    def make(demo: Demo, *, user: str = "oncall") -> Viewers:
        made.append(Viewers(browser, demo, user))
        return made[-1]

    yield make
    for seen in made:
        seen.close()
