"""Every text of the console meets WCAG 2.1 AA contrast in its light and its dark theme:
the colours are console.css's custom properties, read from the file the console serves,
and each text/background pair the stylesheet uses is computed (relative luminance, as
WCAG 2.1 defines it). The browser suite checks the same on rendered pages."""

from __future__ import annotations

import re
from importlib import resources

import pytest

TEXT = 4.5
"""AA for normal text."""
UI = 3.0
"""AA for the parts of a control that show it is one (1.4.11), and large text."""

TEXTS = ("fg", "muted", "crit", "warn", "info", "ok", "accent")
SURFACES = ("bg", "card", "attn-bg")
"""Text colours, and what the page puts under text: the page, a card, the decision block."""
PAIRS = (
    ("on-accent", "accent", TEXT),  # a primary button
    ("on-crit", "crit", TEXT),  # a danger button
    ("paged-fg", "paged-bg", TEXT),  # the paged banner
    ("control", "card", UI),  # a button's or a field's border
    ("control", "bg", UI),
    ("accent", "card", UI),
    ("crit", "card", UI),
)
VAR = re.compile(r"--([a-z-]+)\s*:\s*([^;]+);")
RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
LITERAL = re.compile(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\(|(?<![-\w])(?:white|black)(?![-\w])")


def stylesheet() -> str:
    return (resources.files("bot.chat.console") / "static" / "console.css").read_text()


def themes() -> dict[str, dict[str, str]]:
    """The light theme (the first `:root`), and the dark one (light overridden by the
    `:root` inside `prefers-color-scheme: dark`)."""
    css = stylesheet()
    light = dict(VAR.findall(css.split("}", 1)[0]))
    media = css.split("@media (prefers-color-scheme: dark)", 1)[1]
    dark = {**light, **dict(VAR.findall(media.split("}", 1)[0]))}
    return {"light": light, "dark": dark}


def luminance(colour: str) -> float:
    """WCAG 2.1 relative luminance of `#rrggbb`."""
    value = colour.strip().lstrip("#")
    assert re.fullmatch(r"[0-9a-fA-F]{6}", value), f"{colour!r}: write theme colours as #rrggbb"

    def channel(byte: str) -> float:
        c = int(byte, 16) / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(value[i : i + 2]) for i in (0, 2, 4))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(one: str, other: str) -> float:
    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_contrast_formula_matches_wcags_reference_values() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#ffffff", "#ffffff") == pytest.approx(1.0)
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)  # the AA grey
    # The dark-mode finding: near-white on cream, far below AA.
    assert contrast("#e6e9ef", "#fff7e6") < 1.3


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_text_colour_meets_aa_on_every_surface(theme: str) -> None:
    colours = themes()[theme]
    failing = [
        f"{text} on {surface}: {contrast(colours[text], colours[surface]):.2f}"
        for text in TEXTS
        for surface in SURFACES
        if contrast(colours[text], colours[surface]) < TEXT
    ]
    assert failing == [], f"{theme} theme below {TEXT}:1"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_buttons_banner_and_control_borders_meet_aa(theme: str) -> None:
    colours = themes()[theme]
    failing = [
        f"{fg} on {bg}: {contrast(colours[fg], colours[bg]):.2f} < {low}"
        for fg, bg, low in PAIRS
        if contrast(colours[fg], colours[bg]) < low
    ]
    assert failing == [], theme


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_rule_setting_both_colour_and_background_meets_aa(theme: str) -> None:
    colours = themes()[theme]
    checked, failing = 0, []
    for selector, body in RULE.findall(stylesheet()):
        fg = re.search(r"(?<![-\w])color:\s*var\(--([a-z-]+)\)", body)
        bg = re.search(r"background(?:-color)?:\s*var\(--([a-z-]+)\)", body)
        if fg is None or bg is None:
            continue
        checked += 1
        ratio = contrast(colours[fg.group(1)], colours[bg.group(1)])
        if ratio < TEXT:
            failing.append(f"{selector.strip()}: {fg.group(1)} on {bg.group(1)} {ratio:.2f}")
    assert checked >= 5, "the rules that set both colours were not found"
    assert failing == [], theme


def test_no_colour_is_written_outside_the_themes() -> None:
    """A colour literal in a rule would escape both themes (and this test)."""
    css = re.sub(r"/\*.*?\*/", "", stylesheet(), flags=re.S)
    light_end = css.index("}") + 1
    media = css.index("@media (prefers-color-scheme: dark)")
    dark_end = css.index("}", css.index("}", media) + 1) + 1
    rest = css[light_end:media] + css[dark_end:]
    assert LITERAL.findall(rest) == []


def test_both_themes_define_the_same_colours() -> None:
    found = themes()
    assert set(found["light"]) == set(found["dark"])
    css = stylesheet()
    media = css.split("@media (prefers-color-scheme: dark)", 1)[1].split("}", 1)[0]
    overridden = set(dict(VAR.findall(media)))
    surfaces = {"bg", "fg", "card", "attn-bg", "paged-bg", "paged-fg"}
    assert surfaces <= overridden, "the dark theme must set its own surfaces and text"


def test_the_postmortems_time_and_who_columns_never_break_inside_a_word() -> None:
    """ "Alertma nager" in the timeline: its first two columns keep on one line, and
    nothing that breaks anywhere reaches the postmortem's table."""
    css = re.sub(r"/\*.*?\*/", "", stylesheet(), flags=re.S)
    rules = [(sel.strip(), body) for sel, body in RULE.findall(css)]
    nowrap = [body for sel, body in rules if "#postmortem td:nth-child(-n+2)" in sel]
    assert nowrap and "white-space: nowrap" in nowrap[0]
    article = [body for sel, body in rules if sel == "#postmortem"]
    assert article and "overflow-wrap: normal" in article[0]  # main's `anywhere` stops here
    cells = [body for sel, body in rules if "#postmortem td" in sel or "#postmortem th" in sel]
    assert not any("anywhere" in body or "break-all" in body for body in cells)
