"""Measuring a page as the browser lays it out: what a person sees without scrolling, and
whether they can read it.

- `first_screen(page, selector)`: the element's box lies wholly within the viewport with the
  page scrolled to the top: seen without scrolling.
- `in_view(page, selector)`: an element is shown within the viewport as the page is now
  scrolled (the feedback after a click, where the finger is); `press(page, control)`
  clicks and holds the new message to it.
- `contrast(page, selector)`: the WCAG 2.1 contrast ratio of every text in the element (its
  own text and each visible descendant's, a button's label) against its effective
  background: the first non-transparent background walking up the ancestors,
  semi-transparent layers composited over what lies below. Normal text needs 4.5:1, large
  text (24 px, or 18.66 px bold) 3:1. `assert_contrast` fails naming each text that falls
  short, with both colours.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

NORMAL, LARGE = 4.5, 3.0
"""WCAG 2.1 AA (1.4.3): normal text 4.5:1, large text 3:1."""
FEEDBACK = ".feedback:not(.empty)"
"""The message after a click (the console keeps an empty `.feedback` slot in each block)."""


NEW_TEXT_JS = """([selector, before]) => [...document.querySelectorAll(selector)].some(
    (el) => el.getClientRects().length > 0 && !before.includes(el.innerText.trim()))"""
NEW_IN_VIEW_JS = """([selector, before]) => [...document.querySelectorAll(selector)].some((el) => {
    if (!el.getClientRects().length || before.includes(el.innerText.trim())) return false;
    const r = el.getBoundingClientRect();
    const tall = r.bottom - r.top > innerHeight;
    return r.top >= 0 && r.left >= -0.5 && r.right <= innerWidth + 0.5
        && (tall ? r.top < innerHeight : r.bottom <= innerHeight + 0.5);
})"""
LOOK_AGAIN_MS = 100
SETTLES_MS = 3000
"""How long the page may take to settle after the message appears (the card refreshes under
it, a form folds away): a person reads it once it stops moving."""


def press(page: Page, control: Locator, *, selector: str = FEEDBACK) -> str:
    """Click `control` and wait for a new message (`selector`, a text not shown before the
    click); once the page settles (`SETTLES_MS`) it must be in view where the finger is
    (`in_view`), and read at AA contrast in the page's theme. Its text."""
    before = [text.strip() for text in page.locator(selector).all_inner_texts()]
    control.click()
    page.wait_for_function(NEW_TEXT_JS, arg=[selector, before])
    with contextlib.suppress(PlaywrightTimeout):  # if not, in_view says where it is
        page.wait_for_function(NEW_IN_VIEW_JS, arg=[selector, before], timeout=SETTLES_MS)
    deadline = time.monotonic() + SETTLES_MS / 1000
    while True:  # the card may be swapped under it meanwhile: look again, bounded
        try:
            text = in_view(page, selector, besides=before)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            page.wait_for_timeout(LOOK_AGAIN_MS)
    assert_contrast(page, (selector,), where=f"the feedback {text!r} on {page.url}")
    return text


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


def in_view(page: Page, selector: str = FEEDBACK, *, besides: Sequence[str] = ()) -> str:
    """An element matching `selector` (and saying none of `besides`) is visible inside the
    viewport as the page is scrolled now (no scrolling by the test); its text. One taller
    than the screen must start on it."""
    expect(page.locator(selector).first).to_be_visible()
    found: list[dict[str, Any]] = page.locator(selector).evaluate_all(
        """(els) => els.filter((el) => el.checkVisibility && el.checkVisibility()
                && el.getClientRects().length > 0)
            .map((el) => { const r = el.getBoundingClientRect();
                return {top: r.top, bottom: r.bottom, left: r.left, right: r.right,
                        text: el.innerText.trim(), width: innerWidth, height: innerHeight}; })"""
    )
    shown = [box["text"][:80] for box in found]
    found = [box for box in found if box["text"] not in besides]
    if not found:
        slots: list[str] = page.locator(".feedback").evaluate_all(
            """(els) => els.map((el) => {
                const block = el.closest('[data-feedback-at]');
                const fold = el.closest('details');
                const r = el.getBoundingClientRect();
                return `${block ? block.id : '?'}${fold ? (fold.open ? '(open)' : '(closed)') : ''}`
                    + `.${el.className.trim().replace(/ +/g, '.')}${el.id ? '#' + el.id : ''}`
                    + `=${JSON.stringify(el.textContent.trim().slice(0, 60))}`
                    + (el.textContent.trim() ? ` at ${Math.round(r.top)}..${Math.round(r.bottom)}`
                       + ` of ${innerHeight}, ${el.getClientRects().length} rects,`
                       + ` visible=${el.checkVisibility()}` : ''); })"""
        )
        raise AssertionError(
            f"no new {selector} on {page.url}: it shows {shown or 'none'} "
            f"(the one(s) before the click: {list(besides)}); the slots: {slots}"
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
