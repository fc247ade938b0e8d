"""The measuring tools of the browser suite hold to what they claim, on pages of known
colours and layout (no demo): the contrast of the issue's dark-mode line, large text,
semi-transparent layers, hidden text; an element below the first screen; feedback
scrolled out of view."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page

from tests.browser.measure import assert_contrast, contrast, first_screen, in_view, press
from tests.browser.viewing import PHONE

PAGE = """<!doctype html><html><head>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="margin:0;background:rgb(255,247,230)">
<div id="stale" style="color:rgb(230,233,239)">Waiting for a decision</div>
<div id="plain" style="color:#000;background:#fff">black on white</div>
<div id="large" style="color:#949494;background:#fff;font-size:24px">large grey</div>
<div id="small" style="color:#949494;background:#fff;font-size:16px">small grey</div>
<div id="veil" style="background:rgba(0,0,0,0.5)"><span style="color:#fff">on a veil</span></div>
<div id="hidden"><span style="display:none;color:#fefefe">not drawn</span>
  <button style="color:#fff;background:#0b5fff">Approve</button></div>
<div style="height:2000px"></div>
<p id="below" class="feedback">far below</p>
</body></html>"""


@pytest.fixture
def phone(browser: Browser) -> Page:
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_content(PAGE)
    return page


def test_the_issues_dark_mode_line_fails_and_black_on_white_is_21(phone: Page) -> None:
    (stale,) = contrast(phone, "#stale")
    (plain,) = contrast(phone, "#plain")

    assert (stale.fore, stale.back) == ("rgb(230,233,239)", "rgb(255,247,230)")
    assert stale.ratio == pytest.approx(1.14, abs=0.01)  # WCAG 2.1 relative luminance
    assert not stale.passes
    assert plain.ratio == pytest.approx(21.0)
    refused = r"#stale div#stale 'Waiting for a decision': 1\.14:1 < 4\.5:1 \(rgb\(230"
    with pytest.raises(AssertionError, match=refused):
        assert_contrast(phone, ("#plain", "#stale"))


def test_large_text_needs_3_to_1_normal_text_4_5(phone: Page) -> None:
    (large,) = contrast(phone, "#large")
    (small,) = contrast(phone, "#small")

    assert large.ratio == pytest.approx(small.ratio)
    assert 3 <= large.ratio < 4.5
    assert (large.large, large.passes, small.large, small.passes) == (True, True, False, False)


def test_a_semi_transparent_background_is_composited_over_what_lies_below(phone: Page) -> None:
    (veiled,) = contrast(phone, "#veil")

    # 50 % black over the cream body: rgb(128,124,115), under white text.
    assert veiled.back == "rgb(128,124,115)"
    assert veiled.ratio == pytest.approx(4.17, abs=0.02)


def test_hidden_text_is_not_measured_and_a_buttons_label_is(phone: Page) -> None:
    measured = contrast(phone, "#hidden")

    assert [(c.tag, c.text) for c in measured] == [("button", "Approve")]
    assert_contrast(phone, ("#hidden", "#plain", "#nothing-like-this"))


def test_an_element_below_the_first_screen_or_scrolled_away_is_refused(phone: Page) -> None:
    first_screen(phone, "#stale")
    with pytest.raises(AssertionError, match=r"#below is not within the first screen .*390x844"):
        first_screen(phone, "#below")
    with pytest.raises(AssertionError, match=r"no .feedback in view .*'far below' at 2\d\d\d"):
        in_view(phone, ".feedback")
    phone.locator("#below").scroll_into_view_if_needed()
    assert in_view(phone, ".feedback") == "far below"


PRESSING = """<!doctype html><html><head>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="margin:0;background:#fff;color:#111">
<button id="here" onclick="say('near', 0)">here</button>
<button id="away" onclick="say('far', 0)">away</button>
<button id="late" onclick="say('far', 1)">late</button>
<p id="near" class="feedback empty"></p>
<div style="height:2000px"></div>
<p id="far" class="feedback empty"></p>
<script>
function say(where, late) {
  const el = document.getElementById(where);
  el.textContent = 'said at ' + where; el.classList.remove('empty');
  if (late) setTimeout(() => el.scrollIntoView(), 300);
}
</script></body></html>"""


def test_press_takes_the_new_message_in_view_and_refuses_one_left_off_screen(
    browser: Browser,
) -> None:
    page = browser.new_context(**PHONE).new_page()
    page.set_content(PRESSING)

    assert press(page, page.locator("#here")) == "said at near"
    with pytest.raises(AssertionError, match=r"no .feedback:not\(.empty\) in view .*'said at far'"):
        press(page, page.locator("#away"))
    page.evaluate("() => window.scrollTo(0, 0)")
    page.locator("#far").evaluate("(el) => { el.textContent = ''; el.classList.add('empty'); }")
    assert press(page, page.locator("#late")) == "said at far"  # it settles in view
