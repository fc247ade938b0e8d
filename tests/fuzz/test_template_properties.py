"""Properties of the runbook template renderer (bot/runbooks/templates.py) with label values
an attacker chooses: a label is data, never template code; nothing but `TemplateError`
escapes; output stays bounded; and no template reaches Python internals."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.runbooks import templates
from bot.runbooks.templates import MAX_OUTPUT, TemplateError
from tests.fuzz.conftest import Tally

SETTINGS = settings(
    database=None,
    deadline=None,
    derandomize=True,
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# Template syntax, Python's dunder names and shell characters are as likely as any text.
PIECES = [
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "''.__class__",
    ".__mro__",
    ".__subclasses__()",
    ".__globals__",
    "__builtins__",
    "lipsum",
    "cycler",
    "config",
    "self",
    "request",
    "labels",
    "facts",
    "|attr('__class__')",
    "['__class__']",
    ".format(",
    "%s",
    "$(id)",
    "; reboot",
    "../../",
    "\x00",
]
HOSTILE = st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=12).map("".join)
LABEL = HOSTILE | st.text(max_size=200)
# Templates as runbooks write them (tests/runbooks, runbooks/*.yaml), over hostile labels.
REVIEWED = [
    "{{ labels.Hostname }}",
    "{{ labels.Hostname | lower }}",
    "{{ labels.Hostname }}-bmc",
    "XID {{ labels.xid }} on {{ labels.Hostname }}",
    "{{ labels.gpu | int(-1) }}",
    "{{ labels.get('rack', 'unknown') }}",
    "{{ annotations.summary | default('') | truncate(80) }}",
    "{{ labels.Hostname.split('.')[0] }}",
]
# Context values the fuzz can never reach a method on: calls would be recorded here.
CALLS: list[str] = []


class Probe:
    """An object with a side-effecting method, as a stand-in for any Python object."""

    def __repr__(self) -> str:
        CALLS.append("repr")
        return "Probe()"

    def run(self) -> str:
        CALLS.append("run")
        return "ran"


def _context(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "labels": labels,
        "annotations": {"summary": labels.get("summary", "")},
        "facts": {"node": labels.get("Hostname", ""), "probe": Probe()},
        "steps": {},
        "incident": {"number": 7, "ref": "INC-7", "severity": "critical"},
    }


@SETTINGS
@given(host=LABEL, xid=LABEL)
def test_a_label_value_is_rendered_as_its_text_never_evaluated(
    host: str, xid: str, tally: Tally
) -> None:
    labels = {"Hostname": host, "xid": xid}

    rendered = templates.render("XID {{ labels.xid }} on {{ labels.Hostname }}", _context(labels))

    assert rendered == f"XID {xid} on {host}"
    tally.count("rendered as given")


@SETTINGS
@given(
    template=st.sampled_from(REVIEWED),
    labels=st.dictionaries(st.sampled_from(["Hostname", "xid", "gpu", "summary", "rack"]), LABEL),
)
def test_reviewed_templates_over_hostile_labels_render_or_refuse_and_never_crash(
    template: str, labels: dict[str, str], tally: Tally
) -> None:
    try:
        rendered = templates.render(template, _context(labels))
    except TemplateError as refused:
        assert str(refused).startswith("template "), str(refused)
        tally.count("TemplateError")
        return
    assert len(rendered) <= MAX_OUTPUT
    tally.count("rendered")


@SETTINGS
@given(template=HOSTILE, host=LABEL)
def test_any_template_text_renders_bounded_text_or_is_a_template_error(
    template: str, host: str, tally: Tally
) -> None:
    CALLS.clear()
    try:
        rendered = templates.render(template, _context({"Hostname": host}))
    except TemplateError as refused:
        assert str(refused).startswith(("template ", "fact ")), str(refused)
        tally.count("TemplateError")
    else:
        assert len(rendered) <= MAX_OUTPUT
        # Nothing from inside Python leaks into the output.
        assert "<class " not in rendered and "<built-in" not in rendered, rendered
        assert "<module " not in rendered and "<function " not in rendered, rendered
        tally.count("rendered")
    assert "run" not in CALLS
