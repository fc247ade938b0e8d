"""How the console looks to a tired person: on a phone (390x844) or a desktop (1280x800),
in the light or the dark theme. Measured in the page, as the browser lays it out.

- `first_screen(page, selector)`: the element's box lies wholly within the viewport with the
  page scrolled to the top: seen without scrolling.
- `in_view(page, selector)`: an element is shown within the viewport as the page is now
  scrolled (the feedback after a click, where the finger is).
- `contrast(page, selector)`: the WCAG 2.1 contrast ratio of every text in the element (its
  own text and each visible descendant's) against its effective background: the first
  non-transparent background walking up the ancestors, semi-transparent layers composited
  over what lies below. Normal text needs 4.5:1, large text (24 px, or 18.66 px bold) 3:1.
  `assert_contrast` fails naming each text that falls short, with both colours.
- `Viewers`: the four combinations as extra browser contexts of one person on the SAME
  demo; `look(number, moment)` opens the incident (and the list) on each and holds the
  page to the rules above. A walk calls it at a few moments (first decision, two-person,
  resolved), so four combos cost four page loads, not four demos.
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
NORMAL, LARGE = 4.5, 3.0
"""WCAG 2.1 AA (1.4.3): normal text 4.5:1, large text 3:1."""
FEEDBACK = ".feedback:not(.empty)"
"""The message after a click (the console keeps an empty `.feedback` slot in each block)."""
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


def first_screen(page: Page, selector: str) -> None:
    """`selector`'s element is wholly within the first screen: the page scrolled to the top,
    its box inside the viewport."""
    element = page.locator(selector).first
    expect(element).to_be_visible()
    page.evaluate("() => window.scrollTo(0, 0)")
    box: dict[str, float] = element.evaluate(
        """(el) => { const r = el.getBoundingClientRect();
            return {top: r.top, left: r.left, bottom: r.bottom, right: r.right,
                    width: innerWidth, height: innerHeight, scrolled: scrollY}; }"""
    )
    inside = (
        box["top"] >= 0
        and box["left"] >= 0
        and box["bottom"] <= box["height"] + 0.5
        and box["right"] <= box["width"] + 0.5
    )
    assert inside, (
        f"{selector} is not within the first screen of {page.url} "
        f"({box['width']:.0f}x{box['height']:.0f}, scrolled {box['scrolled']:.0f}px): "
        f"its box is {box['left']:.0f},{box['top']:.0f} to {box['right']:.0f},"
        f"{box['bottom']:.0f}"
    )


def in_view(page: Page, selector: str = FEEDBACK) -> str:
    """An element matching `selector` is visible inside the viewport as the page is scrolled
    now (no scrolling by the test); its text. One taller than the screen must start on it."""
    expect(page.locator(selector).first).to_be_visible()
    found: list[dict[str, Any]] = page.locator(selector).evaluate_all(
        """(els) => els.filter((el) => el.checkVisibility && el.checkVisibility()
                && el.getClientRects().length > 0)
            .map((el) => { const r = el.getBoundingClientRect();
                return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,
                        text: el.innerText.trim(), width: innerWidth, height: innerHeight}; })"""
    )
    for box in found:
        tall = box["bottom"] - box["top"] > box["height"]
        within = (
            box["top"] >= 0
            and box["left"] >= -0.5
            and box["right"] <= box["width"] + 0.5
            and (box["top"] < box["height"] if tall else box["bottom"] <= box["height"] + 0.5)
        )
        if within:
            return str(box["text"])
    raise AssertionError(
        f"no {selector} in view on {page.url}: "
        + "; ".join(
            f"{b['text'][:80]!r} at {b['top']:.0f} to {b['bottom']:.0f} "
            f"(screen {b['height']:.0f} px tall)"
            for b in found
        )
    )


CONTRAST_JS = """
(roots) => {
  const parse = (text) => {
    const m = text.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const parts = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return {r: parts[0], g: parts[1], b: parts[2], a: parts.length > 3 ? parts[3] : 1};
  };
  const over = (top, below) => {
    const a = top.a + below.a * (1 - top.a);
    if (a === 0) return {r: 0, g: 0, b: 0, a: 0};
    const mix = (x, y) => (x * top.a + y * below.a * (1 - top.a)) / a;
    return {r: mix(top.r, below.r), g: mix(top.g, below.g), b: mix(top.b, below.b), a};
  };
  const background = (el) => {
    const layers = [];
    for (let node = el; node; node = node.parentElement) {
      const c = parse(getComputedStyle(node).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let base = {r: 255, g: 255, b: 255, a: 1};  // the canvas under everything
    for (const layer of layers.reverse()) base = over(layer, base);
    return base;
  };
  const channel = (v) => {
    v /= 255;
    return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  const luminance = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
  const ratio = (x, y) => { const [a, b] = [luminance(x), luminance(y)].sort((p, q) => q - p);
    return (a + 0.05) / (b + 0.05); };
  const own = (el) => [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  const shown = (el) => el.getClientRects().length > 0
    && (!el.checkVisibility || el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}));
  const rgb = (c) => `rgb(${Math.round(c.r)},${Math.round(c.g)},${Math.round(c.b)})`;
  const out = [];
  const seen = new Set();
  for (const root of roots) {
    const all = [root, ...root.querySelectorAll('*')];
    for (const el of all) {
      if (seen.has(el) || !shown(el)) continue;
      seen.add(el);
      const isControl = el.matches('button, input[type=submit], a.button');
      if (!own(el) && !isControl) continue;
      const style = getComputedStyle(el);
      const back = background(el);
      const fore = over(parse(style.color) || {r: 0, g: 0, b: 0, a: 1}, back);
      const size = parseFloat(style.fontSize);
      const bold = Number(style.fontWeight) >= 700;
      const large = size >= 24 || (size >= 18.66 && bold);
      const text = (isControl ? el.innerText : [...el.childNodes]
        .filter((n) => n.nodeType === 3).map((n) => n.textContent).join(' ')).trim();
      out.push({
        tag: el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
          + (el.className && typeof el.className === 'string'
             ? '.' + el.className.trim().split(/\\s+/).join('.') : ''),
        text: text.replace(/\\s+/g, ' ').slice(0, 60),
        ratio: ratio(fore, back), large, fore: rgb(fore), back: rgb(back),
      });
    }
  }
  return out;
}
"""


@dataclass(frozen=True)
class Contrast:
    """One text as drawn: its element, words, ratio and colours."""

    tag: str
    text: str
    ratio: float
    large: bool
    fore: str
    back: str

    @property
    def needed(self) -> float:
        return LARGE if self.large else NORMAL

    @property
    def passes(self) -> bool:
        return self.ratio >= self.needed


def contrast(page: Page, selector: str) -> list[Contrast]:
    """Every visible text inside the elements matching `selector`, with its contrast."""
    found: list[dict[str, Any]] = page.locator(selector).evaluate_all(CONTRAST_JS)
    return [Contrast(**item) for item in found]


def assert_contrast(page: Page, selectors: tuple[str, ...], *, where: str = "") -> int:
    """The texts of `selectors` meet AA; how many texts were measured. Fails naming each
    text that does not."""
    measured = [(s, c) for s in selectors for c in contrast(page, s)]
    failing = [
        f"{s} {c.tag} {c.text!r}: {c.ratio:.2f}:1 < {c.needed}:1 ({c.fore} on {c.back})"
        for s, c in measured
        if not c.passes
    ]
    assert not failing, f"contrast below WCAG AA on {where or page.url}:\n" + "\n".join(failing)
    return len(measured)


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
            page.goto(self.demo.url)
            expect(page.locator(f'tr[data-incident="{number}"]')).to_be_visible()
            assert_contrast(page, LIST_KEY, where=f"the list at {where}")
            page.goto(self.demo.at(f"/incidents/{number}"))
            expect(console.card(page)).to_be_visible()
            first_screen(page, "#status-line")
            if decision:
                first_screen(page, "#decision")
            assert_contrast(page, KEY, where=where)
            console.assert_fits_the_screen(page)
            publish_view(page, moment, screen, theme, (docs or {}).get((screen, theme)))
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
