"""No BMC password ever leaves its Secret: every BMC action is run, as an operator would
from the CLI into an incident's log, against real BMC software with a recognisable
password (and once with a wrong one), and the output, the bot's logs at DEBUG, the
incident log in the database and the results are searched for it."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pydantic import SecretStr
from sqlalchemy import select

from bot.actions import registry
from bot.actions.bmc.ipmi import IpmiBmc
from bot.actions.bmc.protocol import BmcTarget, Credentials, PowerState
from bot.cli import main
from bot.db import Database
from bot.incidents.models import LogEntry
from bot.sim import SimHandle
from tests.bmc.conftest import CANARY, Tls, cordon
from tests.support import ipmi_sim, udp_relay
from tests.support.payloads import fixture

NODE = "gpu-node-02"
WRONG = "Wrong-Pw-9a8b7c6d"
BMC_ACTIONS = [a.name for a in registry.all_actions() if a.name.startswith("bmc.")]


def _params(name: str) -> list[str]:
    extra = {"bmc.sel_list": ["limit=3"], "bmc.sensors": ["kind=temperature"]}
    return [f"node={NODE}", *extra.get(name, [])]


@pytest.fixture(autouse=True)
def known_people(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's `--as` names a person of the settings: these are."""
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {}, "bob": {}, "carol": {}}')


@pytest.fixture
def incident(client: httpx.Client) -> str:
    response = client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json"))
    assert response.status_code == 200, response.text
    return str(response.json()["incident"])


@pytest.fixture
def configure(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redfish_sim: SimHandle
) -> Any:
    """Write a settings file for the CLI with this `bmc` section; return nothing."""
    kubeconfig = redfish_sim.write_kubeconfig(tmp_path / "kubeconfig")
    cordon(redfish_sim, NODE)  # as a runbook does before powering it off

    def write(bmc: dict[str, Any]) -> None:
        path = tmp_path / "settings.yaml"
        settings = {
            "database_url": db_url,
            "kubeconfig": str(kubeconfig),
            "bmc": bmc,
            "log_level": "debug",  # every logger speaks, httpx's request lines included
        }
        path.write_text(yaml.safe_dump(settings))
        monkeypatch.setenv("RUNBOOK_BOT_CONFIG", str(path))

    return write


@pytest.fixture
def ipmi_bmc(tmp_path: Path) -> Iterator[ipmi_sim.SimBmc]:
    with ipmi_sim.running(tmp_path / "ipmi", password=CANARY) as bmc:
        yield bmc


def _run_all(incident: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Every BMC action from the CLI into the incident's log; all they printed."""
    printed = []
    for name in BMC_ACTIONS:
        main(["action", name, *_params(name), "--incident", incident, "--as", "alice", "--json"])
        out, err = capsys.readouterr()
        printed.append(out + err)
    return "\n".join(printed)


def _incident_log(db: Database) -> str:
    with db.session() as session:
        rows = session.scalars(select(LogEntry)).all()
        return "\n".join(f"{r.type} {r.summary} {json.dumps(r.data)}" for r in rows)


def _run_and_search(
    incident: str,
    db: Database,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    use_wrong_password: Callable[[], None],
) -> None:
    """Run every BMC action, then one with the wrong password (a refusal must not quote
    what was tried), and search everything they left for both passwords."""
    printed = _run_all(incident, capsys)
    use_wrong_password()
    refused = main(
        ["action", "bmc.power_status", f"node={NODE}", "--incident", incident, "--as", "alice"]
    )
    out, err = capsys.readouterr()

    log = _incident_log(db)
    assert "bmc.before" in log and "bmc.power_cycle" in log, printed  # they ran and logged
    assert refused == 1 and "credentials profile 'default'" in out + err, out + err
    for secret in (CANARY, WRONG):
        for where, text in (
            ("the CLI's output", printed + out + err),
            ("the bot's logs", caplog.text),
            ("the incident log", log),
        ):
            assert secret not in text, f"the BMC password leaked into {where}"


def test_redfish_actions_never_reveal_the_password(
    redfish_sim: SimHandle,
    redfish_tls: Tls,
    configure: Any,
    incident: str,
    db: Database,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    bmc = redfish_sim.bmc_settings(tmp_path / "password", ca_file=redfish_tls.ca_file)
    configure({**bmc, "timeout": "2s", "power_timeout": "10s"})

    def wrong() -> None:
        (tmp_path / "wrong").write_text(WRONG)
        bmc["credentials"]["default"]["password_file"] = str(tmp_path / "wrong")
        configure(bmc)

    _run_and_search(incident, db, capsys, caplog, wrong)
    assert {"httpx", "bot.actions.bmc.redfish"} <= {r.name for r in caplog.records}


def test_ipmi_actions_never_reveal_the_password(
    ipmi_bmc: ipmi_sim.SimBmc,
    configure: Any,
    incident: str,
    db: Database,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    (tmp_path / "password").write_text(CANARY + "\n")
    configure(
        {
            "credentials": {
                "default": {
                    "username": ipmi_bmc.username,
                    "password_file": str(tmp_path / "password"),
                }
            },
            "nodes": {
                NODE: {
                    "protocol": "ipmi",
                    "address": ipmi_bmc.address,
                    "port": ipmi_bmc.port,
                    "cipher_suite": 3,  # ipmi_sim never answers the negotiation
                }
            },
            "timeout": "5s",
            "power_timeout": "20s",
        }
    )

    def wrong() -> None:
        (tmp_path / "password").write_text(WRONG)

    _run_and_search(incident, db, capsys, caplog, wrong)


def _ipmitool_children() -> list[int]:
    """Pids of the ipmitool processes this test process started."""
    mine = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, _, rest = stat.partition(") ")
        if name.endswith("(ipmitool") and rest.split()[1] == mine:
            found.append(int(entry.name))
    return found


def test_a_running_ipmitool_holds_the_password_in_neither_argv_nor_environment(
    ipmi_bmc: ipmi_sim.SimBmc,
) -> None:
    """Against a BMC that answers slowly (a relay holding each datagram), the call works,
    and the ipmitool process, looked at while it runs, shows no password to `ps e`."""
    with udp_relay.delaying((ipmi_bmc.address, ipmi_bmc.port), delay=0.3) as port:
        target = BmcTarget(
            node=NODE, protocol="ipmi", address="127.0.0.1", port=port, cipher_suite=3
        )
        bmc = IpmiBmc(target, Credentials(ipmi_bmc.username, SecretStr(CANARY)), timeout=10)
        states: list[PowerState] = []
        caller = threading.Thread(target=lambda: states.append(bmc.power_state()))
        caller.start()
        try:
            [pid] = ipmi_sim.wait_until(_ipmitool_children, "ipmitool to start")
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            still_running = pid in _ipmitool_children()
        finally:
            caller.join(timeout=20)

    assert still_running, "ipmitool ended before its environment was read"
    assert CANARY.encode() not in argv, "the BMC password is on ipmitool's command line"
    assert CANARY.encode() not in environ, "the BMC password is in ipmitool's environment"
    assert b"IPMI_PASSWORD" not in environ and b"\0-E\0" not in argv
    assert states == [PowerState.ON]
