"""What can be checked of the Dockerfile without a Docker daemon (CI has none): it copies
only project files the build context keeps, runs as the chart's non-root user, ships the
runbooks where the chart expects them, and its HEALTHCHECK command passes against the
real app and fails when nothing answers."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import socket
import subprocess
import sys
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from tests.deploy import chart

ROOT = chart.ROOT
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def _instructions(name: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [
        line.split(None, 1)[1]
        for line in joined.splitlines()
        if line.split(None, 1)[:1] == [name] and not line.startswith("#")
    ]


def _kept_by_dockerignore(path: str) -> bool:
    kept = True
    for pattern in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines():
        pattern = pattern.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negated = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            kept = negated
    return kept


def test_every_copied_path_exists_in_the_repository_and_the_build_context() -> None:
    copied = [
        source
        for line in _instructions("COPY")
        if not line.startswith("--from")
        for source in line.split()[:-1]
    ]

    assert copied
    assert [s for s in copied if not (ROOT / s).exists()] == []
    assert [s for s in copied if not _kept_by_dockerignore(s)] == []
    assert not _kept_by_dockerignore(".venv") and not _kept_by_dockerignore("tests")


def test_the_image_runs_as_the_charts_non_root_user_with_the_shipped_runbooks() -> None:
    values = yaml.safe_load((chart.CHART / "values.yaml").read_text(encoding="utf-8"))
    (user,) = _instructions("USER")
    (entrypoint,) = _instructions("ENTRYPOINT")
    env = " ".join(_instructions("ENV"))

    assert (
        user == f"{values['securityContext']['runAsUser']}:{values['securityContext']['runAsUser']}"
    )
    assert json.loads(entrypoint)[-1] == "runbook-bot"
    assert "COPY runbooks /app/runbooks" in DOCKERFILE
    assert "RUNBOOK_BOT_RUNBOOKS_DIR=/app/runbooks" in env
    assert "RUNBOOK_BOT_POSTMORTEM_TEMPLATES=/app/postmortem" in env
    assert "ipmitool" in " ".join(_instructions("RUN"))
    assert _instructions("ARG")[0] == "BASE=python:3.11-slim"


def _healthcheck() -> list[str]:
    (line,) = _instructions("HEALTHCHECK")
    command: list[str] = json.loads(line.split("CMD", 1)[1])
    assert command[0] == "/opt/runbook-bot/bin/python"  # python, no curl in the image
    return [sys.executable, *command[1:]]


def _probe(port: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RUNBOOK_BOT_LISTEN_PORT": str(port)}
    return subprocess.run(
        _healthcheck(), capture_output=True, text=True, timeout=30, env=env, check=False
    )


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_healthcheck_passes_against_the_served_app(client: httpx.Client) -> None:
    port = urlsplit(str(client.base_url)).port
    assert port is not None

    done = _probe(port)

    assert done.returncode == 0, done.stderr


def test_the_healthcheck_fails_when_nothing_answers() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nobody listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    done = _probe(port)

    assert done.returncode == 1
    assert "Connection refused" in done.stderr
