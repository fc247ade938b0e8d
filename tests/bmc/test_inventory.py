"""The BMC inventory: node -> BMC from settings or node annotations, and credentials that
are read from a file or the environment and never from anywhere an alert can reach."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.actions import ActionContext
from bot.actions.bmc import inventory
from bot.config import load_settings
from bot.errors import ConfigInvalid, CredentialsRefused, PermanentActionError
from bot.sim import SimHandle, running, seed
from tests.sim.waiting import TIME_SCALE


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running(seed(), time_scale=TIME_SCALE) as handle:
        yield handle


def _ctx(sim: SimHandle, bmc: dict[str, Any]) -> ActionContext:
    return ActionContext(
        actor="alice", settings=load_settings(bmc=bmc), kube_factory=sim.api_client
    )


def _annotate(sim: SimHandle, node: str, values: dict[str, str | None]) -> None:
    from kubernetes import client

    body = {"metadata": {"annotations": {f"runbook-bot/bmc-{k}": v for k, v in values.items()}}}
    client.CoreV1Api(sim.api_client()).patch_node(
        node, body, _content_type="application/merge-patch+json"
    )


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "bmc-password"
    path.write_text("s3cret-Pa55\n")
    return path


def test_a_node_listed_in_settings_resolves_with_its_profile(
    sim: SimHandle, password_file: Path
) -> None:
    ctx = _ctx(
        sim,
        {
            "credentials": {"ops": {"username": "admin", "password_file": str(password_file)}},
            "nodes": {
                "gpu-node-02": {
                    "protocol": "ipmi",
                    "address": "10.0.8.12",
                    "port": 6230,
                    "credentials": "ops",
                }
            },
        },
    )
    target = inventory.resolve(ctx, "gpu-node-02")
    assert (target.protocol, target.address, target.port, target.source) == (
        "ipmi",
        "10.0.8.12",
        6230,
        "settings",
    )
    login = inventory.credentials(ctx, target)
    assert login.username == "admin"
    assert login.password.get_secret_value() == "s3cret-Pa55"  # the newline is stripped
    assert "s3cret" not in repr(login) and "s3cret" not in str(target)


def test_a_password_from_the_environment(sim: SimHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BMC_PASSWORD_TEST", "from-env")
    ctx = _ctx(
        sim,
        {
            "credentials": {"default": {"username": "root", "password_env": "BMC_PASSWORD_TEST"}},
            "nodes": {"gpu-node-01": {"protocol": "redfish", "address": "bmc-01.example"}},
        },
    )
    target = inventory.resolve(ctx, "gpu-node-01")
    assert inventory.credentials(ctx, target).password.get_secret_value() == "from-env"
    monkeypatch.delenv("BMC_PASSWORD_TEST")
    with pytest.raises(CredentialsRefused, match=r"password of profile 'default' is empty"):
        inventory.credentials(ctx, target)


def test_an_unreadable_password_file_is_a_credentials_failure_naming_the_file(
    sim: SimHandle, tmp_path: Path
) -> None:
    missing = tmp_path / "nope"
    ctx = _ctx(
        sim,
        {
            "credentials": {"default": {"username": "root", "password_file": str(missing)}},
            "nodes": {"gpu-node-01": {"protocol": "redfish", "address": "10.0.8.11"}},
        },
    )
    target = inventory.resolve(ctx, "gpu-node-01")
    with pytest.raises(CredentialsRefused, match=r"cannot read the BMC password file.*nope"):
        inventory.credentials(ctx, target)


@pytest.mark.parametrize(
    "bmc, fragment",
    [
        (
            {"nodes": {"gpu-node-01": {"protocol": "ipmi", "address": "10.0.0.1"}}},
            "no credentials profile 'default'",
        ),
        (
            {"credentials": {"default": {"username": "a"}}},
            "set exactly one of password_file and password_env",
        ),
        (
            {
                "credentials": {"default": {"username": "a", "password_env": "X"}},
                "nodes": {"gpu-node-01": {"protocol": "telnet", "address": "10.0.0.1"}},
            },
            "protocol",
        ),
        (
            {
                "credentials": {"default": {"username": "a", "password_env": "X"}},
                "nodes": {"gpu-node-01": {"protocol": "ipmi", "address": "10.0.0.1; reboot"}},
            },
            "address",
        ),
    ],
)
def test_bad_inventories_stop_at_start(bmc: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigInvalid, match=fragment):
        load_settings(bmc=bmc)


ANNOTATED: dict[str, Any] = {
    "credentials": {
        "default": {"username": "root", "password_env": "X", "allow_annotations": True}
    },
    "annotations": True,
    "allowed_networks": ["10.0.8.0/24"],
}


def test_an_unlisted_node_may_name_its_bmc_in_annotations(sim: SimHandle) -> None:
    _annotate(sim, "gpu-node-03", {"protocol": "redfish", "address": "10.0.8.13", "port": "8443"})
    ctx = _ctx(sim, ANNOTATED)
    target = inventory.resolve(ctx, "gpu-node-03")
    assert (target.protocol, target.address, target.port, target.source) == (
        "redfish",
        "10.0.8.13",
        8443,
        "annotations",
    )
    assert target.verify_tls is True and target.scheme == "https"


def test_annotations_cannot_name_an_unknown_profile_or_a_bad_value(sim: SimHandle) -> None:
    ctx = _ctx(sim, ANNOTATED)
    _annotate(sim, "gpu-node-04", {"protocol": "ipmi", "address": "10.0.8.14", "credentials": "x"})
    with pytest.raises(PermanentActionError, match="no such profile"):
        inventory.resolve(ctx, "gpu-node-04")
    _annotate(sim, "gpu-node-04", {"protocol": "ssh", "credentials": None})
    with pytest.raises(PermanentActionError, match="runbook-bot/bmc-protocol"):
        inventory.resolve(ctx, "gpu-node-04")


def test_annotations_are_ignored_by_default(sim: SimHandle) -> None:
    _annotate(sim, "gpu-node-03", {"protocol": "redfish", "address": "10.0.8.13"})
    ctx = _ctx(sim, {"credentials": {"default": {"username": "root", "password_env": "X"}}})
    with pytest.raises(PermanentActionError, match="bmc.annotations: false"):
        inventory.resolve(ctx, "gpu-node-03")


def test_a_node_with_no_bmc_anywhere_says_how_to_add_one(sim: SimHandle) -> None:
    ctx = _ctx(sim, {})
    with pytest.raises(PermanentActionError, match="add it under bmc.nodes"):
        inventory.resolve(ctx, "gpu-node-01")
