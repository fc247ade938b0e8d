"""The chaos section of docs/reliability.md is rewritten from recorded figures without
touching what other sections of the file say."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos import figures

ROWS = {
    "tests/chaos/test_x.py::test_a": [
        {"fault": "a | b", "expected": "c", "figures": {"sent": 3, "posts": {"200": 2}}}
    ]
}


def test_only_the_chaos_section_is_replaced(tmp_path: Path) -> None:
    doc = tmp_path / "reliability.md"
    doc.write_text(
        "# Title\n\n<!-- fuzz:start -->\nfuzz rows\n<!-- fuzz:end -->\n\n"
        f"{figures.START}\nold chaos rows\n{figures.END}\n\nafter\n",
        encoding="utf-8",
    )

    figures.write_section(doc, figures.render(ROWS))

    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\n<!-- fuzz:start -->\nfuzz rows\n<!-- fuzz:end -->\n")
    assert text.endswith(f"{figures.END}\n\nafter\n")
    assert "old chaos rows" not in text
    assert "| a \\| b | c | `tests/chaos/test_x.py::test_a` | sent: 3; posts: (200: 2) |" in text


def test_a_missing_document_gets_a_title_and_the_section(tmp_path: Path) -> None:
    doc = tmp_path / "reliability.md"
    figures.write_section(doc, "rows\n")
    assert doc.read_text(encoding="utf-8") == (
        f"{figures.TITLE}\n{figures.START}\nrows\n{figures.END}\n"
    )


def test_a_missing_figures_file_is_refused_with_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.json"
    assert figures.main([str(missing), "--doc", str(tmp_path / "doc.md")]) == 2
    assert f"run the chaos tests with {figures.ENV}={missing}" in capsys.readouterr().err
    assert not (tmp_path / "doc.md").exists()


def test_recorded_rows_replace_the_same_tests_rows(tmp_path: Path) -> None:
    path = tmp_path / "figures.json"
    figures.record(path, "t::a", [{"fault": "f", "expected": "e", "figures": {"n": 1}}])
    figures.record(path, "t::b", [{"fault": "g", "expected": "e", "figures": {"n": 2}}])
    figures.record(path, "t::a", [{"fault": "f", "expected": "e", "figures": {"n": 3}}])
    doc = tmp_path / "doc.md"
    assert figures.main([str(path), "--doc", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert "| f | e | `t::a` | n: 3 |" in text and "n: 1 |" not in text
    assert text.index("`t::a`") < text.index("`t::b`")  # the order they first ran in
