"""The repository stands alone: no tracked file reads, cites or mentions a path outside it.

A clone has nothing beside it, so every tracked text file is read line by line for
- relative paths that climb above the repository root from the file's own folder (`../x`
  tokens, Markdown link and `src=`/`href=` targets), and `@file` arguments (curl's
  `--data @FILE`, run from the root) that do;
- Python path arithmetic that leaves the root: `Path(__file__)` followed by `.parent`,
  `.parents[N]`, `/ ".."`, `os.path.dirname`/`join`, through module-level names;
- absolute paths into a developer's machine (the home, root and work folders), the shared
  folder the project once read its fixtures from, and seed file names.
System paths (`/etc/...`, `/usr/bin/chromium`), URL paths and `../` that stays inside are
fine. A line that must show such a path as an example ends with `# repo-check: example`.
"""

from __future__ import annotations

import ast
import posixpath
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ci import skip_or_fail

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "repo-check: example"
GIT_SECONDS = 30

MACHINE = re.compile(r"(?<![\w.:/~-])/(?:work|home|root|Users)/")
# Spelt in pieces, so this file names no such path itself.
OUTSIDE = "sha" + "red"
SHARED = re.compile(
    r"(?<![\w-])sha" r"red/(?:fixtures|reference|seed|hooks|STYLE\.md|DESIGN\.md)\b"
)
SEED = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b")
CLIMB = re.compile(r"(?<![\w./@-])((?:\.\./)+[\w.~-]*(?:/[\w.~-]+)*)")
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)|\b(?:src|href)=[\"']([^\"']+)[\"']")
AT_FILE = re.compile(r"(?<![\w@])@((?:\.{1,2}/)?[\w.-]+(?:/[\w.-]+)+)")
SCHEME = re.compile(r"^[A-Za-z][\w+.-]*:")


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}"


class NotACheckout(Exception):
    pass


def tracked_files(root: Path) -> list[str]:
    """`git ls-files` of `root`, relative paths."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"],
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            check=False,
        )
    except FileNotFoundError as exc:
        raise NotACheckout(f"git is not installed: {exc}") from None
    if done.returncode != 0:
        raise NotACheckout(f"{root} is not a git checkout: {done.stderr.strip()}")
    return [name for name in done.stdout.split("\0") if name]


def _outside(relative: str) -> bool:
    """Whether a path relative to the root, once normalised, leaves it."""
    normal = posixpath.normpath(relative)
    return normal == ".." or normal.startswith("../")


def _climbs(path: str, target: str) -> bool:
    """Whether `target`, written in the file at `path`, leaves the root."""
    if target.startswith("/"):  # root-relative in a Markdown link, as GitHub reads it
        return _outside(target.lstrip("/"))
    return _outside(posixpath.join(posixpath.dirname(path), target))


def _line_findings(path: str, line: str) -> list[str]:
    found = []
    if MACHINE.search(line):
        found.append("an absolute path on a developer's machine")
    if SHARED.search(line):
        found.append("the shared folder beside the checkout")
    if SEED.search(line):
        found.append("a seed file")
    if any(_climbs(path, m.group(1)) for m in CLIMB.finditer(line)):
        found.append("a relative path above the repository root")
    targets = [re.split(r"[#?]", m.group(1) or m.group(2))[0] for m in LINK.finditer(line)]
    local = [t for t in targets if t and not SCHEME.match(t) and not t.startswith("//")]
    if any(_climbs(path, target) for target in local):
        found.append("a link above the repository root")
    if any(_outside(m.group(1)) for m in AT_FILE.finditer(line)):
        found.append("an @file argument above the repository root")
    return found


class _PathArithmetic:
    """Evaluates the path expressions of one module relative to the root, where it can."""

    def __init__(self, path: str) -> None:
        self.here = path
        self.names: dict[str, str] = {}

    def value(self, node: ast.expr) -> str | None:
        """The path `node` evaluates to, relative to the root (may start with `..`)."""
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return self.here
            return self.names.get(node.id)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            base = self.value(node.value)
            return None if base is None else posixpath.normpath(posixpath.join(base, ".."))
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "parents"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
        ):
            base = self.value(node.value.value)
            ups = [".."] * (node.slice.value + 1)
            return None if base is None else posixpath.normpath(posixpath.join(base, *ups))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            base, part = self.value(node.left), _string(node.right)
            return None if base is None or part is None else posixpath.join(base, part)
        return None

    def _call(self, node: ast.Call) -> str | None:
        func = node.func
        name = ast.unparse(func)
        if name in ("Path", "pathlib.Path", "PurePath") and len(node.args) == 1:
            return self.value(node.args[0])
        if name == "os.path.dirname" and len(node.args) == 1:
            base = self.value(node.args[0])
            return None if base is None else posixpath.normpath(posixpath.join(base, ".."))
        if name in ("os.path.join", "os.path.abspath", "os.path.realpath") and node.args:
            base = self.value(node.args[0])
            parts = [_string(arg) for arg in node.args[1:]]
            if base is None or any(part is None for part in parts):
                return None
            return posixpath.join(base, *[p for p in parts if p is not None])
        if isinstance(func, ast.Attribute) and func.attr in ("resolve", "absolute"):
            return self.value(func.value)
        if isinstance(func, ast.Attribute) and func.attr == "joinpath":
            base = self.value(func.value)
            parts = [_string(arg) for arg in node.args]
            if base is None or any(part is None for part in parts):
                return None
            return posixpath.join(base, *[p for p in parts if p is not None])
        return None

    def findings(self, source: str) -> list[int]:
        """Line numbers of expressions whose path leaves the root."""
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return []
        lines = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                value = self.value(node.value)
                if isinstance(target, ast.Name) and value is not None:
                    self.names[target.id] = value
        for node in ast.walk(tree):
            if isinstance(node, ast.expr):
                value = self.value(node)
                if value is not None and _outside(value):
                    lines.add(node.lineno)
        return sorted(lines)


def _string(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _text(file: Path) -> str | None:
    data = file.read_bytes()
    if b"\0" in data[:8192]:
        return None  # binary: images, fonts
    return data.decode("utf-8", errors="replace")


def outside_references(root: Path, files: list[str]) -> list[Finding]:
    """Every line of `files` (relative to `root`) that names a path outside `root`."""
    found: set[Finding] = set()
    for path in files:
        file = root / path
        if not file.is_file() or file.is_symlink():
            continue
        text = _text(file)
        if text is None:
            continue
        lines = text.splitlines()
        for number, line in enumerate(lines, 1):
            if EXAMPLE in line:
                continue
            found.update(Finding(path, number, why) for why in _line_findings(path, line))
        if path.endswith(".py"):
            for number in _PathArithmetic(path).findings(text):
                if EXAMPLE not in lines[number - 1]:
                    found.add(Finding(path, number, "Python path arithmetic above the root"))
    return sorted(found)


def test_no_tracked_file_names_a_path_outside_the_repository() -> None:
    try:
        files = tracked_files(ROOT)
    except NotACheckout as exc:
        skip_or_fail(str(exc), install="run the suite from a git clone")

    found = outside_references(ROOT, files)

    assert len(files) > 100  # the whole tree was read, not an empty listing
    assert found == [], "paths outside the repository:\n" + "\n".join(map(str, found))


def spelt(text: str) -> str:
    """An example as the check reads it: `^/` is a step up (dot dot slash), `~home/` and
    `~work/` the machine folders. Written so, this file names no such path itself."""
    up, home, work = "." + "./", "/ho" + "me/", "/wo" + "rk/"
    return text.replace("^/", up).replace("~home/", home).replace("~work/", work)


FAKE_TREE = {
    "README.md": [
        "Posts [a payload](examples/a.json) and [docs](docs/guide.md#setup).",
        "Made from [the design](^/" + OUTSIDE + "/DESIGN.md).",  # repo-check: example
        "curl --data @examples/a.json http://127.0.0.1:8080/webhooks/alertmanager",
        "curl --data @^/fixtures/a.json http://127.0.0.1:8080/",  # repo-check: example
        "Chromium at /usr/bin/chromium; settings in /etc/runbook-bot/config.yaml.",
        "See https://example.com/^/^/x and /static/^/config.py and gpu-01/^/^/x.",
    ],
    "docs/guide.md": [
        "# yaml-language-server: $schema=^/docs/runbook.schema.json",
        "Back to the [readme](^/README.md), not [above it](^/^/x.md).",  # repo-check: example
        '<img src="^/^/logo.png"> <img src="images/ok.png">',  # repo-check: example
        "Recorded under ~home/alice/runbook-bot.",  # repo-check: example
        "Copied from " + OUTSIDE + "/fixtures/alertmanager.",  # repo-check: example
        "The seed is in 000_0123456789abcdef.txt.",  # repo-check: example
        "A wiki page at https://wiki.example.com/work~home/ stays a URL.",
    ],
    "tests/support/payloads.py": [
        "from pathlib import Path",
        "import os",
        "ROOT = Path(__file__).resolve().parents[2]",
        "FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures'",  # repo-check: example
        "SHARED = ROOT.parent / 'other'",  # repo-check: example
        "DOCS = ROOT / 'docs' / '..' / 'README.md'",
        "UP = ROOT / '..' / 'x'",  # repo-check: example
        "HERE = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))",
        "AWAY = os.path.join(HERE, '..')",  # repo-check: example
        "INSIDE = Path(__file__).parent.parent.parent / 'bench'",
        "DATA = Path('~work/data')",  # repo-check: example
    ],
    "scripts/run": [
        "#!/bin/sh",
        'cd "$(dirname "$0")/.." && ls ^/^/elsewhere',  # repo-check: example
        "cat ^/tests/support/payloads.py",
    ],
}
FAKE_FINDINGS = [
    "README.md:2: a link above the repository root",
    "README.md:2: a relative path above the repository root",
    "README.md:2: the shared folder beside the checkout",
    "README.md:4: an @file argument above the repository root",
    "docs/guide.md:2: a link above the repository root",
    "docs/guide.md:2: a relative path above the repository root",
    "docs/guide.md:3: a link above the repository root",
    "docs/guide.md:3: a relative path above the repository root",
    "docs/guide.md:4: an absolute path on a developer's machine",
    "docs/guide.md:5: the shared folder beside the checkout",
    "docs/guide.md:6: a seed file",
    "scripts/run:2: a relative path above the repository root",
    "tests/support/payloads.py:4: Python path arithmetic above the root",
    "tests/support/payloads.py:5: Python path arithmetic above the root",
    "tests/support/payloads.py:7: Python path arithmetic above the root",
    "tests/support/payloads.py:9: Python path arithmetic above the root",
    "tests/support/payloads.py:11: an absolute path on a developer's machine",
]


def _fake_tree(root: Path) -> list[str]:
    for name, lines in FAKE_TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(spelt("\n".join(lines) + "\n"), encoding="utf-8")
    logo = b"\x89PNG\r\n\x1a\n\0\0" + spelt("~home/x/^/^/^/").encode()
    (root / "docs" / "logo.png").write_bytes(logo)
    return [*FAKE_TREE, "docs/logo.png"]


def test_the_check_names_file_and_line_of_every_path_outside_and_nothing_else(
    tmp_path: Path,
) -> None:
    files = _fake_tree(tmp_path)

    found = outside_references(tmp_path, files)

    assert [str(f) for f in found] == FAKE_FINDINGS


def test_the_check_reads_the_files_git_tracks_and_refuses_a_folder_that_is_no_checkout(
    tmp_path: Path,
) -> None:
    checkout, plain = tmp_path / "checkout", tmp_path / "plain"
    checkout.mkdir()
    plain.mkdir()
    _fake_tree(checkout)
    (checkout / "untracked.md").write_text(spelt("[x](^/^/^/x)\n"))  # repo-check: example
    git = ["git", "-C", str(checkout)]
    subprocess.run([*git, "init", "-q"], check=True, timeout=GIT_SECONDS)
    subprocess.run([*git, "add", *FAKE_TREE], check=True, timeout=GIT_SECONDS)

    assert tracked_files(checkout) == sorted(FAKE_TREE)
    with pytest.raises(NotACheckout, match=f"{plain} is not a git checkout: fatal: not a git"):
        tracked_files(plain)
