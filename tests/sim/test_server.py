"""Serving: the standalone `run` command and the loopback-only rule."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bot.actions import ActionContext, execute, registry
from bot.config import load_settings
from bot.sim import SimHandle, run
from bot.sim.presets import SEED


def test_running_serves_on_loopback_and_writes_a_usable_kubeconfig(
    sim: SimHandle, tmp_path: Path
) -> None:
    path = sim.write_kubeconfig(tmp_path / "nested" / "kubeconfig")
    config = yaml.safe_load(path.read_text(encoding="utf-8"))

    assert sim.url.startswith("http://127.0.0.1:")
    assert config["current-context"] == "runbook-bot-sim"
    assert config["clusters"][0]["cluster"]["server"] == sim.url
    assert httpx.get(f"{sim.url}/version", timeout=5).json()["gitVersion"] == "v1.32.4"


def test_run_refuses_to_serve_beyond_loopback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="only on loopback"):
        run(SEED, host="0.0.0.0", port=0, kubeconfig_path=tmp_path / "kubeconfig")


@dataclass
class Stopped:
    """What a standalone `run` printed and returned once interrupted, and what `until` saw."""

    seen: Any
    out: str
    err: str
    returncode: int


def _run_standalone(tmp_path: Path, until: Callable[[], Any]) -> Stopped:
    """Start `run` in a subprocess (kernel-chosen ports, BMCs served), poll `until()` for
    up to 20 s while it serves, then interrupt it with Ctrl-C (SIGINT)."""
    kubeconfig = tmp_path / "kubeconfig"
    script = (
        "from bot.sim import run; "
        f"run({str(SEED)!r}, port=0, kubeconfig_path={str(kubeconfig)!r}, time_scale=0.05, "
        "bmc_port=0)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 20
        seen = None
        while seen is None and time.monotonic() < deadline:
            time.sleep(0.05)
            seen = until()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=5)
    return Stopped(seen, out, err, process.returncode)


def test_run_serves_until_interrupted_and_announces_the_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"

    def version() -> Any:
        if not kubeconfig.exists():
            return None
        url = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))["clusters"][0]
        try:
            return httpx.get(f"{url['cluster']['server']}/version", timeout=2).json()
        except httpx.TransportError:
            return None

    stopped = _run_standalone(tmp_path, version)
    out = stopped.out

    assert stopped.seen is not None and stopped.seen["minor"] == "32"
    assert stopped.returncode == 0, stopped.err
    assert f"kubeconfig: {kubeconfig}" in out
    assert f"kubectl --kubeconfig {kubeconfig} get nodes" in out
    assert "http://127.0.0.1:" in out
    # The BMCs were served, and the settings file written for them is a valid one.
    settings_file = tmp_path / "kubeconfig.settings.yaml"
    assert f"settings: {settings_file}" in out
    assert f"runbook-bot --config {settings_file} action bmc.power_status" in out
    settings = load_settings(settings_file)
    assert settings.kubeconfig == kubeconfig
    entry = settings.bmc.nodes["gpu-node-01"]
    assert (entry.protocol, entry.scheme, entry.system) == ("redfish", "http", "gpu-node-01")
    password = Path(str(settings.bmc.credentials["default"].password_file))
    assert password.stat().st_mode & 0o077 == 0  # readable by its owner only
    assert password.read_text().strip() not in out  # the password is never printed


def test_the_bmcs_of_run_answer_the_bot(tmp_path: Path) -> None:
    """`runbook-bot sim`'s settings file drives a real BMC action against its Redfish."""
    settings_file = tmp_path / "kubeconfig.settings.yaml"

    def power_status() -> Any:
        if not settings_file.exists():
            return None
        ctx = ActionContext(actor="alice", settings=load_settings(settings_file))
        return execute(registry.get("bmc.power_status"), {"node": "gpu-node-03"}, ctx)

    outcome = _run_standalone(tmp_path, power_status).seen

    assert outcome is not None and outcome.result.ok, outcome
    assert outcome.result.summary == "gpu-node-03 is powered on"
