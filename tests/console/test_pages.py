"""The console's pages: the incident list and its filters, the incident page and card,
the postmortem rendered and downloadable, static files from the package, and the
security headers; alert text is always escaped."""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import httpx
import pytest

from bot.chat.console import pages, render
from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import log
from bot.incidents import service as incidents
from tests.console.rig import ConsoleRig, browser, login
from tests.runbooks.rig import TWO_STEPS
from tests.support.payloads import alert, notification

Browsers = Callable[[], httpx.Client]
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def open_evil(rig: ConsoleRig) -> int:
    """An incident whose alert summary (its title) carries HTML."""
    body = alert(host="gpu-node-03", severity="warning")
    body["annotations"]["summary"] = f"GPU fell off the bus {EVIL}"
    result = rig.ingest(notification([body]))
    assert result.opened
    return result.incident


def rows(page: str) -> list[str]:
    return [part.split('"', 1)[0] for part in page.split('data-incident="')[1:]]


def test_the_list_filters_by_status_and_severity(rig: ConsoleRig, browsers: Browsers) -> None:
    rig.write(TWO_STEPS)
    critical = rig.fire()
    warning = open_evil(rig)
    done = rig.fire()
    client = browsers()
    csrf = login(client, "carol")
    client.post(f"/incidents/{done}/resolve", data={"csrf": csrf, "disposition": "fixed"})

    page = client.get("/")
    assert 'id="filters"' in page.text and 'table id="incidents"' in page.text
    assert 'option value="active" selected' in page.text
    in_table = page.text.split('id="incidents"', 1)[1]
    assert rows(in_table) == [str(critical), str(warning)]  # active, critical first
    assert rows(client.get("/?status=all").text.split('id="incidents"', 1)[1]) == [
        str(done), str(critical), str(warning)
    ]  # critical first, newest first within  # fmt: skip
    resolved = client.get("/?status=resolved&severity=all").text.split('id="incidents"', 1)[1]
    assert rows(resolved) == [str(done)]
    warnings = client.get("/?status=all&severity=warning").text.split('id="incidents"', 1)[1]
    assert rows(warnings) == [str(warning)]
    assert f'<a href="/incidents/{critical}">INC-{critical}</a>' in page.text


def test_a_bad_filter_says_which_values_there_are(browsers: Browsers) -> None:
    client = browsers()
    login(client, "alice")
    answer = client.get("/?status=burning")
    assert answer.status_code == 400
    assert "status must be one of active, all, open" in answer.text


def test_alert_text_is_escaped_everywhere(rig: ConsoleRig, browsers: Browsers) -> None:
    number = open_evil(rig)
    client = browsers()
    login(client, "alice")
    for path in ("/", f"/incidents/{number}", f"/incidents/{number}/card",
                 f"/incidents/{number}/postmortem"):  # fmt: skip
        page = client.get(path)
        assert page.status_code == 200, path
        assert "<script>alert" not in page.text and "<img src=x" not in page.text, path
        assert "&lt;script&gt;" in page.text, path


def test_the_postmortem_renders_and_downloads_as_markdown(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    number = open_evil(rig)
    client = browsers()
    login(client, "bob")
    page = client.get(f"/incidents/{number}/postmortem?lang=en")
    assert page.status_code == 200
    article = page.text.split('<article id="postmortem">', 1)[1]
    assert f"<h1>Postmortem: INC-{number}" in article  # Markdown became HTML
    assert 'id="postmortem-download"' in page.text
    assert f'href="/incidents/{number}/postmortem.md?lang=en" download=' in page.text

    download = client.get(f"/incidents/{number}/postmortem.md?lang=en")
    assert download.status_code == 200
    assert download.headers["content-type"].startswith("text/markdown")
    assert download.headers["content-disposition"] == (
        f'attachment; filename="INC-{number}-postmortem.en.md"'
    )
    assert download.text.startswith(f"# Postmortem: INC-{number}")
    assert "GPU fell off the bus" in download.text
    zh = client.get(f"/incidents/{number}/postmortem?lang=zh")
    assert zh.status_code == 200 and 'lang=zh" download=' in zh.text
    bad = client.get(f"/incidents/{number}/postmortem?lang=fr")
    assert bad.status_code == 400 and "lang must be zh or en" in bad.text


def test_an_unknown_incident_is_a_404_page(browsers: Browsers) -> None:
    client = browsers()
    login(client, "alice")
    answer = client.get("/incidents/999")
    assert answer.status_code == 404
    assert "INC-999" in answer.text


def test_the_incident_page_shows_the_card_the_log_and_the_links(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire(host="gpu-node-01")
    client = browsers()
    login(client, "alice")
    page = client.get(f"/incidents/{number}").text
    assert f'<section id="card" data-status="open" data-incident="{number}"' in page
    assert 'class="step" id="step-status"' in page and 'data-step="status"' in page
    assert "<dt>node</dt><dd>gpu-node-01</dd>" in page
    assert "runbook gpu-xid v1" in page and 'class="elapsed"' in page
    for action in ("ack", "own", "resolve", "resolve-submit"):
        assert f'data-action="{action}"' in page, action
    assert 'textarea name="disposition"' in page
    assert f'<a id="postmortem-link" href="/incidents/{number}/postmortem">' in page
    seqs = [e.seq for e in rig.log(number)]
    for seq in seqs:
        assert f'<li data-seq="{seq}">' in page
    assert f'data-last="{seqs[-1]}"' in page
    assert 'id="followups"' in page and 'id="followup-add"' in page


def test_a_long_log_shows_its_last_entries_and_all_on_request(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    number = rig.fire(host="gpu-node-01")
    with rig.db.transaction() as session:
        incident = incidents.get(session, number, lock=True)
        for index in range(pages.LOG_TAIL + 20):
            log.append(session, incident, at=rig.clock.now(), actor=log.Actor.human("alice"),
                       type="note", summary=f"note {index}")  # fmt: skip
        total = incident.log_seq
    client = browsers()
    login(client, "alice")

    page = client.get(f"/incidents/{number}").text
    shown = [int(seq) for seq in re.findall(r'<li data-seq="(\d+)">', page)]
    assert shown == list(range(total - pages.LOG_TAIL + 1, total + 1))
    assert f"The last {pages.LOG_TAIL} of {total} entries" in page
    assert f'data-last="{total}"' in page  # the live timeline goes on from the newest

    whole = client.get(f"/incidents/{number}?log=all").text
    assert len(re.findall(r'<li data-seq="', whole)) == total
    assert 'id="log-older"' not in whole


@pytest.mark.parametrize("path", ["/login", "/", "/incidents/1"])
def test_console_pages_carry_the_security_headers(
    rig: ConsoleRig, browsers: Browsers, path: str
) -> None:
    rig.write(TWO_STEPS)
    rig.fire()
    client = browsers()
    login(client, "alice")
    answer = client.get(path)
    assert answer.status_code == 200
    csp = answer.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "same-origin"
    assert answer.headers["cache-control"] == "no-store"
    assert "<script>" not in answer.text and " style=" not in answer.text  # CSP-clean


def test_static_files_are_served_from_the_package(browsers: Browsers) -> None:
    client = browsers()
    for name, media in render.STATIC.items():
        packaged = (resources.files("bot.chat.console") / "static" / name).read_bytes()
        answer = client.get(f"/static/{name}")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith(media)
        assert answer.content == packaged
    assert client.get("/static/../config.py").status_code == 404
    assert client.get("/static/secret.txt").status_code == 404


def test_the_console_is_not_served_when_disabled(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = ConsoleRig(db, clock, tmp_path, console={"enabled": False})
    with rig.serving() as url, browser(url) as client:
        assert client.get("/").status_code == 404
        assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize(
    ("path", "status", "logged_in"),
    [
        *((f"/static/{name}", 200, False) for name in sorted(render.STATIC)),
        ("/static/secret.txt", 404, False),
        ("/", 303, False),
        ("/incidents/%C2%B2", 400, True),
        ("/incidents/1/events", 401, False),
    ],
)
def test_every_console_response_carries_the_security_headers_static_files_included(
    browsers: Browsers, path: str, status: int, logged_in: bool
) -> None:
    client = browsers()
    if logged_in:
        login(client, "alice")
    answer = client.get(path)
    assert answer.status_code == status, answer.text
    csp = answer.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "same-origin"
    expected = "public, max-age=300" if path.startswith("/static/") and status == 200 else None
    assert answer.headers["cache-control"] == (expected or "no-store")
