"""The action registry: every action declared completely, untrusted input refused by the
parameter models before any API call, and the `runbook-bot actions` / `action` commands
run in-process against the simulated cluster."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import kubernetes.config  # noqa: F401  (imported early, as in any running process)
import pytest

from bot.actions import Params, Result, Risk, cluster, registry
from bot.cli import main
from bot.config import load_settings
from bot.db import Database
from bot.errors import ActionUnknown, ParamsInvalid
from bot.sim import SimHandle
from tests.actions.conftest import Recorder, RunAction
from tests.support.payloads import fixture
from tests.support.rows import log_types, verifies

OURS = {
    "k8s.node_status",
    "k8s.cordon",
    "k8s.uncordon",
    "k8s.taint",
    "k8s.untaint",
    "k8s.label",
    "k8s.pods_on_nodes",
    "k8s.pods_using_volume",
    "k8s.node_job",
    "volcano.queue_state",
}
TEN_KIB = "a" * 10 * 1024


def test_every_action_has_a_dotted_name_a_description_a_risk_and_models() -> None:
    actions = registry.all_actions()

    assert {a.name for a in actions} >= OURS
    for action in actions:
        assert re.fullmatch(r"[a-z0-9]+(\.[a-z0-9_]+)+", action.name), action.name
        assert action.description.strip(), action.name
        assert isinstance(action.risk, Risk), action.name
        assert issubclass(action.params, Params) and action.params is not Params, action.name
        assert issubclass(action.result, Result), action.name
        assert registry.get(action.name) is action


def test_reads_are_read_risk_and_writes_need_an_approver() -> None:
    risks = {name: registry.get(name).risk for name in OURS}

    reads = {n for n, r in risks.items() if r is Risk.READ}
    assert reads == {"k8s.node_status", "k8s.pods_on_nodes", "k8s.pods_using_volume"}
    assert {r for n, r in risks.items() if n not in reads} == {Risk.CHANGE}


def test_an_unknown_action_suggests_the_closest_name() -> None:
    with pytest.raises(ActionUnknown) as unknown:
        registry.get("k8s.cordn")

    assert str(unknown.value) == "unknown action 'k8s.cordn'; did you mean 'k8s.cordon'?"


BAD_INPUT = [
    # Alert labels that are not node names.
    ("k8s.cordon", {"node": "GPU-node_02"}, "node"),
    ("k8s.cordon", {"node": "gpu-node-02."}, "node"),
    ("k8s.cordon", {"node": "-x"}, "node"),
    # Shell metacharacters, wherever text goes.
    ("k8s.cordon", {"node": "gpu-node-02; reboot"}, "node"),
    ("k8s.uncordon", {"node": "$(id)"}, "node"),
    ("k8s.node_status", {"node": "`id`"}, "node"),
    ("k8s.pods_on_nodes", {"nodes": ["gpu-node-01", "a|b"]}, "nodes.1"),
    ("k8s.taint", {"node": "a&&b", "key": "x", "effect": "NoSchedule"}, "node"),
    ("k8s.taint", {"node": "gpu-node-02", "key": "x;y", "effect": "NoSchedule"}, "key"),
    ("k8s.label", {"node": "gpu-node-02", "labels": {"zone": "$(id)"}}, "labels.zone"),
    ("k8s.pods_using_volume", {"claim": "ml/datasets; rm -rf /"}, "claim"),
    ("k8s.pods_using_volume", {"nfs_server": "nfs|evil"}, "nfs_server"),
    ("volcano.queue_state", {"queue": "`id`", "state": "closed"}, "queue"),
    ("k8s.node_job", {"node": "gpu-node-02", "command": ["bash", "-c", "id"]}, "command"),
    # Ten kibibytes of anything.
    ("k8s.cordon", {"node": TEN_KIB}, "node"),
    ("k8s.cordon", {"node": "gpu-node-02", "reason": TEN_KIB}, "reason"),
    (
        "k8s.taint",
        {"node": "gpu-node-02", "key": "x", "value": TEN_KIB, "effect": "NoSchedule"},
        "value",
    ),
    ("k8s.pods_on_nodes", {"nodes": ["gpu-node-01"] * 51}, "nodes"),
    # Unknown parameters.
    ("k8s.cordon", {"node": "gpu-node-02", "force": True}, "force"),
    (
        "k8s.node_status",
        {"node": "gpu-node-02", "kubeconfig": "/etc/kubernetes/admin.conf"},
        "kubeconfig",
    ),
    # Wrong types and values.
    ("k8s.cordon", {"node": 2}, "node"),
    ("k8s.cordon", {"node": ["gpu-node-02"]}, "node"),
    ("k8s.uncordon", {"node": "gpu-node-02", "force": "maybe"}, "force"),
    ("k8s.pods_on_nodes", {"nodes": "gpu-node-02"}, "nodes"),
    ("k8s.taint", {"node": "gpu-node-02", "key": "x", "effect": "NoExec"}, "effect"),
    ("k8s.label", {"node": "gpu-node-02", "labels": "zone=a"}, "labels"),
    ("volcano.queue_state", {"queue": "default", "state": "paused"}, "state"),
    (
        "k8s.pods_using_volume",
        {"claim": "ml/datasets", "storage_class": "nfs-client"},
        "(parameters)",
    ),
    ("k8s.pods_using_volume", {}, "(parameters)"),
    ("k8s.cordon", {}, "node"),
]


@pytest.mark.parametrize(("name", "raw", "field"), BAD_INPUT)
def test_bad_input_is_refused_by_the_parameter_model_before_any_api_call(
    run_action: RunAction,
    sim: SimHandle,
    recorder: Recorder,
    name: str,
    raw: dict[str, Any],
    field: str,
) -> None:
    with pytest.raises(ParamsInvalid) as refused:
        run_action(name, **raw)

    assert str(refused.value).startswith(f"{name}: invalid parameters: {field}=")
    assert len(str(refused.value)) < 1000  # a 10 KiB input is not echoed back whole
    assert sim.cluster.requests_made() == []
    assert recorder.records == []


@pytest.fixture(autouse=True)
def known_people(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's `--as` names a person of the settings: these are."""
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {}, "bob": {}, "carol": {}}')


@pytest.fixture
def kubeconfig(sim: SimHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the CLI at the simulator as an operator would, through the environment."""
    path = sim.write_kubeconfig(tmp_path / "kc")
    monkeypatch.setenv("RUNBOOK_BOT_KUBECONFIG", str(path))
    return path


def test_the_cluster_connection_follows_the_kubeconfig_environment_variable(
    sim: SimHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sim.write_kubeconfig(tmp_path / "kc")))

    # Only loads the configuration: no request goes to whatever cluster it names.
    api_client = cluster.connect(load_settings())

    assert api_client.configuration.host == sim.url


def test_actions_command_lists_every_registered_action(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["actions"])

    out = capsys.readouterr().out
    assert code == 0
    for action in registry.all_actions():
        assert re.search(rf"^{re.escape(action.name)}\s+{action.risk.value}\s", out, re.M)


def test_actions_command_shows_one_actions_parameters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["actions", "k8s.node_job"])

    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("k8s.node_job (change): Run a command")
    assert re.search(r"^  command\s+.*required", out, re.M)
    assert "Dry run: yes" in out


def test_action_cordon_dry_run_through_the_cli_changes_nothing(
    kubeconfig: Path, sim: SimHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sim.cluster.snapshot()

    code = main(["action", "k8s.cordon", "node=gpu-node-02", "--dry-run"])

    out, err = capsys.readouterr()
    assert (code, out) == (0, "gpu-node-02 cordoned (dry run)\n")
    assert "... gpu-node-02 cordoned (dry run)" in err
    assert sim.cluster.snapshot() == before
    [patch] = sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02")
    assert patch.query.get("dryRun") == "All"


def test_action_with_bad_input_through_the_cli_exits_1_before_any_request(
    kubeconfig: Path, sim: SimHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["action", "k8s.cordon", "node=gpu-node-02;reboot"])

    assert code == 1
    assert "k8s.cordon: invalid parameters: node=" in capsys.readouterr().err
    assert sim.cluster.requests_made() == []


def test_action_with_an_incident_records_started_and_finished_in_its_log(
    kubeconfig: Path,
    sim: SimHandle,
    client: httpx.Client,
    db: Database,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", db_url)
    opened = client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json"))
    assert opened.json()["incident"] == "INC-1"

    code = main(
        [
            "action",
            "k8s.cordon",
            "node=gpu-node-02",
            "reason=XID 79",
            "--incident",
            "INC-1",
            "--as",
            "alice",
        ]
    )

    assert code == 0, capsys.readouterr().err
    assert log_types(db, 1)[-2:] == ["action.started", "action.finished"]
    assert verifies(db, 1)
    node = sim.cluster.snapshot().nodes["gpu-node-02"]
    assert node.unschedulable is True
    assert node.annotations["runbook-bot/incident"] == "INC-1"
    assert (node.annotations["runbook-bot/by"], node.annotations["runbook-bot/reason"]) == (
        "alice",
        "XID 79",
    )


def test_the_risk_table_in_docs_lists_every_action_at_its_risk() -> None:
    text = (Path(__file__).parents[2] / "docs" / "actions.md").read_text(encoding="utf-8")
    documented: dict[str, str] = {}
    for risk in ("read", "change", "disruptive"):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{risk}` |"))
        cells = row.split("|")[3]
        documented.update(dict.fromkeys(re.findall(r"`([a-z0-9]+\.[a-z_]+)`", cells), risk))
    actual = {a.name: a.risk.value for a in registry.all_actions()}
    assert documented == actual
