"""The incident page answers "what does this person have to decide now?" first: the
status line, the one decision waiting with its buttons, the step under way, the
incident's buttons, then one folded line for skipped and not-reached steps, then the log.
Answers to a click land in the block that was pressed; a person without a role sees
whom to ask instead of buttons; the list puts what waits for you first."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx

from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import oncall
from tests.chat.slack_rig import DISRUPTIVE
from tests.console.rig import ConsoleRig, browser, click, login
from tests.console.test_paging import console_rig
from tests.runbooks.rig import TWO_STEPS
from tests.support import server
from tests.support.payloads import alert, notification

Browsers = Callable[[], httpx.Client]
LAYOUT = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: app
        title: Tell the job's owner
        manual: tell them their job crashed the GPU
        when: labels.gpu == "application"
      - id: info
        title: Note the informational XID
        manual: note it
        when: labels.gpu == "informational"
      - id: cordon
        title: Cordon the node
        action: k8s.cordon
        with: {node: "{{ facts.node }}", reason: "XID on {{ facts.node }}"}
      - id: drain
        title: Drain the node
        action: k8s.drain
        with: {node: "{{ facts.node }}", reason: "XID"}
        when: steps.cordon.status == "succeeded"
"""
MANUAL = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - {id: call, title: Call the vendor, manual: call them}
"""


def block(page: str, opening: str) -> str:
    """The markup from `opening` (e.g. `<section id="decision"`) to its closing tag."""
    tag = opening[1:].split(" ", 1)[0]
    start = page.index(opening)
    depth, at = 0, start
    pattern = re.compile(rf"<(/?){tag}\b")
    for found in pattern.finditer(page, start):
        depth += -1 if found.group(1) else 1
        at = found.end()
        if depth == 0:
            return page[start : page.index(">", at) + 1]
    raise AssertionError(f"{opening} is not closed")


def text_of(markup: str) -> str:
    """What a person reads: the markup without its tags (attributes are not shown)."""
    return " ".join(re.sub(r"<[^>]+>", " ", markup).split())


def test_the_page_reads_status_line_decision_buttons_folded_steps_then_the_log(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(LAYOUT)
    number = rig.fire(host="gpu-node-02", gpu=5)
    assert rig.states(number) == {
        "app": "skipped",
        "info": "skipped",
        "cordon": "awaiting_approval",
    }
    client = browsers()
    login(client, "alice")
    page = client.get(f"/incidents/{number}").text

    order = ['id="status-line"', '<section id="decision"', 'id="incident-actions"',
             '<details id="folded"', 'id="timeline"', 'id="followups"']  # fmt: skip
    places = [page.index(marker) for marker in order]
    assert places == sorted(places), dict(zip(order, places, strict=True))
    status = text_of(block(page, '<div id="status-line"'))
    assert f"INC-{number} · gpu-node-02 GPU 5 GPUXIDError" in status
    assert "since" in status and "no owner" in status

    decision = block(page, '<section id="decision"')
    assert 'data-step="cordon"' in decision and "Waiting for your decision" in decision
    assert f'/steps/{rig.runs(number)["cordon"].id}/approve"' in decision
    assert 'data-step="app"' not in decision
    assert "waiting for one person to approve" in text_of(decision)

    folded = block(page, '<details id="folded"')
    assert '<details id="folded" ' in folded and " open" not in folded.split(">", 1)[0]
    summary = text_of(folded.split("</summary>", 1)[0])
    assert summary == "2 steps skipped: application/informational branches · 1 not reached yet"
    for step in ("app", "info", "drain"):
        assert f'data-step="{step}"' in folded and f'data-step="{step}"' not in decision
    assert page.count('data-step="cordon"') == 2  # the item, and #decision naming it
    assert "awaiting approval" not in page


def test_a_step_under_way_is_shown_in_running_and_the_decision_says_nothing_waits(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    assert rig.states(number) == {"status": "approved"}  # a read step, not run yet
    client = browsers()
    login(client, "bob")
    page = client.get(f"/incidents/{number}").text
    decision = block(page, '<section id="decision"')
    assert text_of(decision) == "Nothing waits for a decision: Node status is running."
    running = block(page, '<section id="running"')
    assert 'data-step="status"' in running and "starting" in text_of(running)
    assert page.index('<section id="decision"') < page.index('<section id="running"')
    assert page.index('<section id="running"') < page.index('<details id="folded"')


def test_a_person_without_a_role_sees_no_decision_buttons_and_whom_to_ask(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(LAYOUT)
    number = rig.fire()
    viewer, owner = browsers(), browsers()
    login(viewer, "mallory")
    csrf = login(owner, "carol")

    card = viewer.get(f"/incidents/{number}/card").text
    assert 'data-waiting="none"' in card.split(">", 1)[0]
    assert 'method="post"' not in card and "data-action=" not in card
    note = text_of(block(card, '<p class="viewer-note"'))
    assert note == (
        f"You can look at INC-{number} but not decide: your login has no role. Ask a "
        "responder to decide, or an admin to give you a role (console.users.mallory.roles "
        "in the settings)."
    )
    assert "Waiting for a responder's decision" in card
    row = viewer.get("/").text.split(f'data-incident="{number}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-waiting="none"' in row and "a decision waits for a responder" in row

    assert click(owner, f"/incidents/{number}/own", csrf).json()["ok"] is True
    card = viewer.get(f"/incidents/{number}/card").text
    assert "Ask Carol (the owner) to decide" in card


def test_the_on_call_person_is_whom_a_viewer_asks_when_nobody_owns_it(
    db: Database, clock: FrozenClock
) -> None:
    rig = console_rig(db, clock)
    number = rig.open("critical")
    with db.session() as session:
        on_call = oncall.current(session, rig.settings, clock.now()).person
    assert on_call is not None
    with server.running(rig.settings, db, clock) as url, browser(url) as viewer:
        login(viewer, "mallory")
        card = viewer.get(f"/incidents/{number}/card").text
    assert f"Ask {on_call.title()} (on call) to decide" in card


def test_the_list_puts_what_waits_for_you_first_then_critical_then_the_rest(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(DISRUPTIVE)
    for_you = rig.fire(host="gpu-node-01", severity="warning")  # drain waits
    second = rig.fire(host="gpu-node-02", severity="warning")  # alice approves it below
    unmatched = rig.ingest(notification([alert(host="gpu-node-03", alertname="DiskFull")]))
    critical = unmatched.incident  # critical, no runbook: nothing to decide
    quiet = rig.ingest(
        notification([alert(host="gpu-node-04", alertname="FanSlow", severity="warning")])
    ).incident
    alice, carol = browsers(), browsers()
    csrf = login(alice, "alice")
    login(carol, "carol")
    run = rig.runs(second)["drain"].id
    approved = click(alice, f"/incidents/{second}/steps/{run}/approve", csrf, confirmed="1")
    assert approved.json()["ok"] is True

    def rows(client: httpx.Client) -> list[tuple[str, str, str]]:
        table = client.get("/").text.split('id="incidents"', 1)[1]
        found = re.findall(r'<tr data-incident="(\d+)"[^>]*data-waiting="(\w+)">(.*?)</tr>',
                           table, re.S)  # fmt: skip
        return [(n, who, text_of(cells.split('class="waits">', 1)[1])) for n, who, cells in found]

    assert [(int(n), who) for n, who, _ in rows(alice)] == [
        (for_you, "you"), (critical, "none"), (quiet, "none"), (second, "second")
    ]  # fmt: skip
    words = {int(n): text for n, _, text in rows(alice)}
    assert words[for_you].startswith("your decision waits: drain")
    assert words[second].startswith("approved by you, waiting for one more: drain")
    assert words[critical].startswith("no decision waits")
    # The second person's list: both drains wait for them, the one approved first counted.
    assert [(int(n), who) for n, who, _ in rows(carol)][:2] == [(second, "you"), (for_you, "you")]
    assert dict((int(n), t) for n, _, t in rows(carol))[second].startswith(
        "one more approval waits for you: drain"
    )


def test_the_paged_banner_is_one_line_per_incident_naming_its_title_once(
    db: Database, clock: FrozenClock
) -> None:
    rig = console_rig(db, clock)
    with db.session() as session:
        on_call = oncall.current(session, rig.settings, clock.now()).person
    assert on_call is not None
    numbers = [rig.open("critical", host=f"gpu-node-1{i}") for i in range(4)]
    rig.at(0)
    with server.running(rig.settings, db, clock) as url, browser(url) as paged:
        login(paged, on_call)
        page = paged.get("/").text
    banner = block(page, '<div id="paged"')
    lines = re.findall(r"<li data-paged=\"(\d+)\"[^>]*>(.*?)</li>", banner, re.S)
    assert sorted(int(n) for n, _ in lines) == sorted(numbers)
    for number, line in lines:
        shown = text_of(line)
        title = f"gpu-node-1{numbers.index(int(number))} GPU 5 GPUXIDError"
        assert shown.count(title) == 1, shown
        assert re.fullmatch(rf"INC-{number} critical {title} paged \d\d:\d\d:\d\d", shown), shown
        assert "\n" not in line.strip()


def test_an_answer_without_javascript_is_shown_in_the_block_that_was_pressed(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(LAYOUT)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "alice")
    page = client.get(f"/incidents/{number}").text
    for opening in ('<div id="status-line"', '<section id="decision"', '<div id="incident-actions"',
                    '<section id="followups"'):  # fmt: skip
        assert '<p class="feedback empty" role="status" aria-live="polite"></p>' in block(
            page, opening
        ), opening
    run = rig.runs(number)["cordon"].id
    answer = client.post(
        f"/incidents/{number}/steps/{run}/approve", data={"csrf": csrf, "at": "decision"}
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/incidents/{number}#decision"
    decision = block(client.get(f"/incidents/{number}").text, '<section id="decision"')
    said = f"INC-{number} cordon: approved; it starts now"
    assert re.search(rf'<p class="feedback good" id="flash"[^>]*>{said}</p>', decision), decision

    odd = client.post(f"/incidents/{number}/ack", data={"csrf": csrf, "at": "javascript:x"})
    assert odd.headers["location"] == f"/incidents/{number}#incident-actions"


def test_resolving_a_critical_incident_without_a_disposition_says_what_to_write(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "carol")
    page = client.get(f"/incidents/{number}").text
    assert 'rows="3" required' in block(page, '<form method="post" action="/incidents/1/resolve"')
    answer = click(client, f"/incidents/{number}/resolve", csrf, disposition="  ")
    assert answer.status_code == 409
    flash = answer.json()["flash"]
    assert flash.startswith(f"INC-{number} is critical: write the disposition")
    assert "--note" not in flash and "before resolving" in flash
    assert "incident.resolved" not in rig.types(number)

    plain = client.post(f"/incidents/{number}/resolve", data={"csrf": csrf, "disposition": ""})
    actions = block(client.get(plain.headers["location"]).text, '<div id="incident-actions"')
    assert 'class="feedback bad" id="flash"' in actions and "write the disposition" in actions


def test_a_manual_step_waits_for_someone_to_do_it_not_for_approval(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(MANUAL)
    number = rig.fire()
    client = browsers()
    login(client, "alice")
    decision = block(client.get(f"/incidents/{number}").text, '<section id="decision"')
    assert "waiting for someone to do it and mark it done" in text_of(decision)
    assert "approv" not in text_of(decision).lower()
    assert 'data-action="done"' in decision and 'data-action="approve"' not in decision
