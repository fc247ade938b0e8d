"""The console as a tired person sees it: on a phone (390x844) or a desktop (1280x800), in
the light or the dark theme.

`Viewers` holds one person's four combinations as extra browser contexts on the SAME demo,
logged in once; `look(number, moment)` opens the list and the incident page on each and
holds them to `measure`'s rules: the status line (and the waiting decision) on the first
screen, AA contrast for the key texts, nothing wider than the screen. A walk calls it at a
few moments (first decision, two-person, resolved), so the four combinations cost page
loads, not demos. The first screens a look is asked to publish are saved to the artifacts
and, with UPDATE_SCREENSHOTS=1, to docs/images.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.browser import console
from tests.browser.demo import Demo
from tests.browser.measure import FEEDBACK, assert_contrast, first_screen

Theme = Literal["light", "dark"]
Screen = Literal["phone", "desktop"]
DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 800}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}
SCREENS: dict[Screen, dict[str, Any]] = {"phone": PHONE, "desktop": DESKTOP}
THEMES: tuple[Theme, ...] = ("light", "dark")
COMBOS: tuple[tuple[Screen, Theme], ...] = tuple((s, t) for s in SCREENS for t in THEMES)
KEY = (
    "#status-line",
    "#decision",
    "#running",
    "#folded > summary",
    FEEDBACK,
    "#paged",
)
"""The incident page's texts that must read in both themes (absent ones are not there to read)."""
LIST_KEY = ("#paged", "tr[data-incident]")
DOCS_IMAGES = Path(__file__).parents[2] / "docs" / "images"


@dataclass
class Viewers:
    """One person's four views (phone/desktop x light/dark) of a demo, as browser contexts of
    their own, logged in once. `look` checks them at a moment of a walk."""

    browser: Browser
    demo: Demo
    user: str = "oncall"
    pages: dict[tuple[Screen, Theme], Page] = field(default_factory=dict)
    contexts: list[BrowserContext] = field(default_factory=list)
    looked: list[str] = field(default_factory=list)

    def open(self) -> None:
        for screen, theme in COMBOS:
            context = self.browser.new_context(
                **SCREENS[screen], color_scheme=theme, locale="en-US"
            )
            self.contexts.append(context)
            page = context.new_page()
            console.log_in(page, self.demo, self.user)
            self.pages[(screen, theme)] = page

    def close(self) -> None:
        for context in self.contexts:
            context.close()
        self.contexts.clear()
        self.pages.clear()

    def look(
        self,
        number: int,
        moment: str,
        *,
        decision: bool = True,
        docs: Mapping[tuple[Screen, Theme], str] | None = None,
    ) -> None:
        """At `moment`: the list and the incident page read in every combination, and (with
        `decision`) the waiting decision is on the first screen. `docs` names the images
        in docs/images that the first screens of some combinations update."""
        if not self.pages:
            self.open()
        for (screen, theme), page in self.pages.items():
            where = f"{moment}, {screen}, {theme}"
            page.goto(self.demo.at("/?status=all"))  # a resolved incident too
            expect(page.locator(f'tr[data-incident="{number}"]')).to_be_visible()
            assert_contrast(page, LIST_KEY, where=f"the list at {where}")
            page.goto(self.demo.at(f"/incidents/{number}"))
            expect(console.card(page)).to_be_visible()
            first_screen(page, "#status-line")
            if decision:
                first_screen(page, "#decision")
            assert_contrast(page, KEY, where=where)
            console.assert_fits_the_screen(page)
            image = (docs or {}).get((screen, theme))
            if image:  # a screenshot costs; only the ones the docs show
                publish_view(page, moment, screen, theme, image)
        self.looked.append(moment)


def publish_view(
    page: Page, moment: str, screen: Screen, theme: Theme, image: str | None = None
) -> Path:
    """The first screen as this combination shows it, to the artifacts; with
    UPDATE_SCREENSHOTS=1 also to docs/images/`image` when one is named."""
    console.ARTIFACTS.mkdir(exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", moment.lower()).strip("-")
    path = console.ARTIFACTS / f"view-{slug}-{screen}-{theme}.png"
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(path))
    if image and os.environ.get("UPDATE_SCREENSHOTS") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMAGES / image)
    return path
