"""`runbook-bot demo`: one command starts the simulator, the bot, its worker and the console,
prints where to log in, and fires the seed's alerts through the real webhook.

Each test runs the command as a subprocess from the repository root, as a user would after
`pip install -e .`, and talks to it only over HTTP.
"""

from __future__ import annotations

import re
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.sim import alerts
from tests.demo.running import PASSWORD, REPO, demo
from tests.sim.waiting import eventually
from tests.support.cli import Run

pytestmark = pytest.mark.timeout(180)


def _incidents(client: httpx.Client) -> list[dict[str, Any]]:
    response = client.get("/api/incidents")
    assert response.status_code == 200, response.text
    incidents: list[dict[str, Any]] = response.json()["incidents"]
    return incidents


def _steps(client: httpx.Client, ref: str) -> dict[str, Any]:
    response = client.get(f"/api/incidents/{ref}/steps")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _step(client: httpx.Client, ref: str, step: str) -> dict[str, Any]:
    (row,) = [s for s in _steps(client, ref)["steps"] if s["step"] == step]
    return row


def _approve(client: httpx.Client, ref: str, step: str, auth: dict[str, str]) -> None:
    response = client.post(f"/api/incidents/{ref}/steps/{step}/approve", json={}, headers=auth)
    assert response.status_code == 200, response.text


def _waiting(client: httpx.Client, ref: str, step: str) -> dict[str, Any] | None:
    row = _step(client, ref, step)
    return row if row["state"] == "awaiting_approval" else None


def test_the_xid_demo_prints_its_logins_and_the_gpu_is_cordoned_and_drained_on_approval(
    tmp_path: Path,
) -> None:
    with demo(tmp_path, "--scenario", "xid79", "--delay", "1s", "--after", "start") as running:
        assert running.lines[1:5] == [
            f"login: oncall {PASSWORD} (responder)",
            f"login: second {PASSWORD} (second_line)",
            f"login: admin {PASSWORD} (admin)",
            f"login: viewer {PASSWORD} (no role: may look, may not decide)",
        ]
        assert running.said("runbooks") == "./runbooks"
        assert running.said("scenario xid79 in 1s").startswith(
            "GPU 5 of gpu-node-02 falls off the bus (XID 79); GPUXIDError (critical)"
        )
        folder = running.folder
        assert folder.is_dir()
        anonymous = httpx.post(
            running.url + "webhooks/alertmanager", json=alerts.firing("storage", now=_now())
        )
        assert anonymous.status_code == 401  # the demo's webhook wants its token

        with running.client() as client:
            (xid,) = eventually(lambda: _incidents(client), timeout=30, what="the XID incident")
            assert (xid["title"], xid["severity"], xid["drill"]) == (
                "gpu-node-02 GPU 5 XID 79",
                "critical",
                None,
            )
            assert _steps(client, xid["id"])["runbook"].startswith("gpu-xid ")
            cordon = eventually(
                lambda: _waiting(client, xid["id"], "cordon"), timeout=30, what="cordon"
            )
            assert cordon["approvals_required"] == 1

            oncall = running.decide_as("oncall")
            _approve(client, xid["id"], "cordon", oncall)
            drain = eventually(
                lambda: _waiting(client, xid["id"], "drain"), timeout=30, what="drain"
            )
            assert drain["approvals_required"] == 1
            _approve(client, xid["id"], "drain", oncall)
            drained = eventually(
                lambda: (row := _step(client, xid["id"], "drain"))["state"] == "succeeded" and row,
                timeout=60,
                what="the drain of gpu-node-02",
            )
            assert "drained" in drained["summary"]
            assert drained["actor"] == "oncall"

        assert running.stop(signal.SIGTERM) == 0
        assert not folder.exists()  # the temporary directory went with it


def _asking(client: httpx.Client, ref: str) -> list[str]:
    """The steps of the incident that wait for a person: its buttons."""
    return [s["step"] for s in _steps(client, ref)["steps"] if s["state"] == "awaiting_approval"]


def test_all_fires_five_emergencies_in_order_each_reaching_a_decision_and_ctrl_c_ends_it(
    tmp_path: Path,
) -> None:
    with demo(
        tmp_path, "--scenario", "all", "--delay", "0s", "--every", "1s", "--after", "start"
    ) as running:
        planned = [line.split(" in ")[0] for line in running.lines if line.startswith("scenario ")]
        assert planned == [f"scenario {name}" for name in alerts.names()]
        with running.client() as client:
            opened = eventually(
                lambda: len(found := _incidents(client)) == 5 and found,
                timeout=60,
                what="five incidents",
            )
            by_number = sorted(opened, key=lambda incident: incident["number"])
            runbooks = [_steps(client, i["id"])["runbook"].split()[0] for i in by_number]
            asking = {
                runbook: eventually(
                    lambda ref=incident["id"]: _asking(client, ref),
                    timeout=60,
                    what=f"a decision in the {runbook} incident",
                )
                for runbook, incident in zip(runbooks, by_number, strict=True)
            }
            node_down = by_number[runbooks.index("node-down")]["id"]
            read = {s["step"]: s["summary"] for s in _steps(client, node_down)["steps"]}
        # Fired in the plan's order, each on a fault the bot could already see: the node-down
        # runbook read the node down and the machine off, and asks for the cordon.
        assert runbooks == [alerts.get(name).runbook for name in alerts.names()]
        assert read["node_status"].startswith("gpu-node-04: Ready=False")
        assert read["power"] == "gpu-node-04 is powered off"
        assert asking["node-down"] == ["cordon"]
        assert asking["gpu-xid"] == ["cordon"]
        folder = running.folder
        assert running.stop(signal.SIGINT) == 0
        assert not folder.exists()


def test_by_default_the_scenario_waits_for_the_first_console_login(tmp_path: Path) -> None:
    with demo(tmp_path, "--scenario", "xid79", "--delay", "0s") as running:
        assert running.said("scenario xid79 0s after the first login").startswith("GPU 5")
        with running.client() as api:
            time.sleep(2)  # a scenario that ignored the login would have fired by now
            assert _incidents(api) == []
            with httpx.Client(base_url=running.url, timeout=10) as browser:
                form = browser.get("/login")
                csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
                assert csrf is not None, form.text
                fields = {"username": "viewer", "password": PASSWORD, "csrf": csrf.group(1)}
                assert browser.post("/login", data=fields).status_code == 303
            eventually(lambda: _incidents(api), timeout=30, what="the XID incident")
        assert running.stop() == 0


def test_with_dir_the_demo_keeps_its_database_after_it_stops(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    with demo(tmp_path, "--scenario", "none", "--dir", str(kept)) as running:
        assert running.said("scenario") == "none (post your own alerts to the webhook)"
        with running.client() as client:
            answer = client.post(
                "/webhooks/alertmanager", json=alerts.firing("overheating", now=_now())
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["incident"] == "INC-1"
        assert running.stop() == 0
    assert (kept / "runbook-bot.db").is_file()


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--delay", "soon"], "--delay: 'soon' is not a duration"),
        (["--password", ""], "--password is empty"),
        (["--time-scale", "0"], "--time-scale 0 is out of range; give a factor above 0"),
    ],
)
def test_bad_options_are_refused_with_what_to_write(
    run: Run, args: list[str], complaint: str
) -> None:
    code, out, err = run("demo", "--port", "0", *args)
    assert (code, out) == (2, "")
    assert complaint in err


def _now() -> datetime:
    return datetime.now(UTC)


def test_outside_the_checkout_the_demo_says_it_loads_the_installed_checkouts_runbooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.cli.demo import runbooks_dir

    monkeypatch.chdir(tmp_path)  # no ./runbooks here
    path, where = runbooks_dir()

    assert path == REPO / "runbooks"
    assert where == f"{REPO / 'runbooks'} (the source checkout)"
