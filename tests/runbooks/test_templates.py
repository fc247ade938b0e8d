"""Templates render in the sandbox: facts in order, undefined names are errors, escapes
and blow-ups are refused before they run, `when` is a plain truth."""

from __future__ import annotations

from typing import Any

import pytest

from bot.runbooks import templates
from bot.runbooks.templates import TemplateError

LABELS = {"Hostname": "gpu-node-02", "gpu": "5", "xid": "79"}
CONTEXT: dict[str, Any] = {
    "labels": LABELS,
    "annotations": {"summary": "GPU 5 fell off the bus"},
    "facts": {"node": "gpu-node-02", "gpu": "5"},
    "steps": {"classify": {"status": "succeeded", "ok": True, "result": {"class": "bus"}}},
    "incident": {"number": 7, "ref": "INC-7", "severity": "critical"},
}


def test_facts_render_in_order_and_each_sees_the_ones_before() -> None:
    facts = {
        "node": "{{ labels.Hostname }}",
        "gpu": "{{ labels.gpu | int }}",
        "where": "{{ facts.node }}/gpu{{ facts.gpu }}",
        "summary": "{{ annotations.summary | lower }}\n",
    }

    rendered = templates.render_facts(facts, LABELS, {"summary": "GPU 5 Fell Off"})

    assert rendered == {
        "node": "gpu-node-02",
        "gpu": "5",
        "where": "gpu-node-02/gpu5",
        "summary": "gpu 5 fell off",
    }
    assert list(rendered) == list(facts)


def test_a_fact_cannot_see_a_later_fact() -> None:
    facts = {"where": "{{ facts.node }}", "node": "{{ labels.Hostname }}"}

    with pytest.raises(TemplateError) as raised:
        templates.render_facts(facts, LABELS, {})

    assert str(raised.value) == (
        "fact 'where': template '{{ facts.node }}': 'dict object' has no attribute 'node'"
    )


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ labels.Hostnme }}", "'dict object' has no attribute 'Hostnme'"),
        ("{{ lables.Hostname }}", "'lables' is undefined"),
        ("{{ steps.drain.ok }}", "'dict object' has no attribute 'drain'"),
        ("node-{{ facts.missing }}-x", "'dict object' has no attribute 'missing'"),
    ],
)
def test_anything_undefined_is_an_error_never_an_empty_string(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as raised:
        templates.render(template, CONTEXT)

    assert str(raised.value) == f"template {template!r}: {message}"


def test_default_gives_a_fallback_for_a_missing_label() -> None:
    assert templates.render("{{ labels.rack | default('none') }}", CONTEXT) == "none"
    assert templates.render("{{ labels.get('rack', 'r0') }}", CONTEXT) == "r0"


@pytest.mark.parametrize(
    ("template", "refusal"),
    [
        ("{{ ''.__class__.__mro__ }}", "access to attribute '__class__' of 'str' object is unsafe"),
        ("{{ labels.__class__.__init__ }}", "access to attribute '__class__' of 'dict' object"),
        ("{{ labels.Hostname.format_map(labels) }}", "str.format is not available"),
        ("{{ '{0.__class__}'.format(labels) }}", "str.format is not available"),
        ("{{ '%s' % labels }}", "% formatting of text is not available"),
        ("{{ labels.Hostname.ljust(10) }}", "access to attribute 'ljust' of 'str' object"),
        ("{{ labels.Hostname | int }}", "'gpu-node-02' is not an integer"),
    ],
)
def test_sandbox_escapes_are_refused(template: str, refusal: str) -> None:
    with pytest.raises(TemplateError) as raised:
        templates.render(template, CONTEXT)

    assert str(raised.value).startswith(f"template {template!r} refused by the sandbox: ")
    assert refusal in str(raised.value)


def test_names_that_do_not_exist_cannot_be_climbed_either() -> None:
    with pytest.raises(TemplateError) as raised:
        templates.render("{{ cycler.__init__.__globals__ }}", CONTEXT)

    assert (
        str(raised.value) == "template '{{ cycler.__init__.__globals__ }}': 'cycler' is undefined"
    )


def test_templates_cannot_change_what_they_are_given() -> None:
    labels = dict(LABELS)

    for template in ("{{ labels.pop('gpu') }}", "{{ labels.update({'gpu': '0'}) }}"):
        with pytest.raises(TemplateError, match="refused by the sandbox"):
            templates.render(template, {**CONTEXT, "labels": labels})

    assert labels == LABELS


def test_methods_of_arbitrary_objects_are_never_called() -> None:
    calls: list[str] = []

    class Probe:
        name = "probe"

        def reboot(self) -> str:
            calls.append("reboot")
            return "rebooted"

    with pytest.raises(TemplateError, match="refused by the sandbox"):
        templates.render("{{ probe.reboot() }}", {"probe": Probe()})

    assert templates.render("{{ probe.name }}", {"probe": Probe()}) == "probe"
    assert calls == []


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ range(10**9) | length }}", "Range too big"),
        ("{{ 'x' * 10**6 }}", "* would build more than 65536 items"),
        ("{{ [0] * 10**6 }}", "* would build more than 65536 items"),
        ("{{ 10 ** (10 ** 10) }}", "the number would be larger than 4096 bits"),
        ("{{ range(100000) | join('x' * 1000) }}", "join would build more than 65536"),
    ],
)
def test_blowups_are_refused_before_they_are_built(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as raised:
        templates.render(template, CONTEXT)

    assert message in str(raised.value)


def test_output_is_bounded_to_64_kib() -> None:
    half = "{{ 'x' * 32768 }}"

    assert len(templates.render(half + half, CONTEXT)) == templates.MAX_OUTPUT
    with pytest.raises(TemplateError) as raised:
        templates.render(half + half + "!", CONTEXT)
    assert str(raised.value).endswith("renders more than 65536 characters")


@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(9) %}{% for j in range(9) %}x{% endfor %}{% endfor %}",
        "{% set x = 'a' %}{{ x }}",
        "{% macro m() %}x{% endmacro %}",
        "{% include 'other' %}",
    ],
)
def test_only_expressions_and_if_are_available(template: str) -> None:
    with pytest.raises(TemplateError) as raised:
        templates.check(template)

    assert "runbook templates use {{ expressions }} and {% if %} only" in str(raised.value)


def test_if_blocks_render() -> None:
    template = "{% if labels.gpu | int > 3 %}high{% else %}low{% endif %}-{{ facts.node }}"

    assert templates.render(template, CONTEXT) == "high-gpu-node-02"


@pytest.mark.parametrize(
    ("source", "expression", "message"),
    [
        ("{{ facts.node ", False, "unexpected end of template"),
        ("{{ facts.node | nope }}", False, "No filter named 'nope'"),
        ("{{ facts.node is nope }}", False, "No test named 'nope'"),
        ("steps.classify.ok and", True, "unexpected 'end of template'"),
        ("facts.node facts.gpu", True, "unexpected 'facts' after the expression"),
    ],
)
def test_syntax_errors_say_what_does_not_parse(source: str, expression: bool, message: str) -> None:
    with pytest.raises(TemplateError) as raised:
        templates.check(source, expression=expression)

    assert str(raised.value).startswith(f"template {source!r} does not parse: ")
    assert message in str(raised.value)


def test_render_params_renders_every_string_leaf_and_leaves_the_rest() -> None:
    with_ = {
        "node": "{{ facts.node }}",
        "gpu": 5,
        "force": False,
        "selector": {"gpu-index": "{{ facts.gpu }}", "limit": None},
        "command": ["nvidia-smi", "-i", "{{ facts.gpu }}"],
    }

    assert templates.render_params(with_, CONTEXT) == {
        "node": "gpu-node-02",
        "gpu": 5,
        "force": False,
        "selector": {"gpu-index": "5", "limit": None},
        "command": ["nvidia-smi", "-i", "5"],
    }


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("steps.classify.ok", True),
        ("not steps.classify.ok", False),
        ("steps.classify.result['class'] not in ['application', 'informational']", True),
        ("facts.gpu | int in [13, 31]", False),
        ("labels.get('rack') and incident.severity == 'critical'", False),
        ("labels.xid == '79' and incident.severity == 'critical'", True),
        ("labels.Hostname.startswith('gpu-')", True),
        ("labels.rack is defined", False),
    ],
)
def test_when_is_true_or_false(expression: str, expected: bool) -> None:
    assert templates.evaluate(expression, CONTEXT) is expected


def test_when_on_something_undefined_is_an_error_not_false() -> None:
    with pytest.raises(TemplateError) as raised:
        templates.evaluate("steps.drain.ok", CONTEXT)

    assert str(raised.value) == "template 'steps.drain.ok': 'dict object' has no attribute 'drain'"


def test_references_lists_names_and_fact_and_step_lookups() -> None:
    template = (
        "{{ facts.node ~ facts['gpu'] }}{% if steps.drain.result.ok %}{{ labels.x }}{% endif %}"
    )

    assert templates.references(template) == {
        "facts",
        "facts.node",
        "facts.gpu",
        "steps",
        "steps.drain",
        "labels",
    }
    assert templates.references("steps.classify.ok and incident.number > 3", expression=True) == {
        "steps",
        "steps.classify",
        "incident",
    }
    assert templates.references("plain text, no names") == set()
