"""Runbook templates cannot climb to Python internals by routes the sandbox tests in
tests/runbooks/test_templates.py do not take: the `attr` filter, subscripts, Jinja's own
globals (`lipsum`, `self`) and a context object's methods. Each is a `TemplateError`, and
no method of a context object ever runs."""

from __future__ import annotations

import pytest

from bot.runbooks import templates
from bot.runbooks.templates import TemplateError
from tests.fuzz.test_template_properties import CALLS, _context


@pytest.mark.parametrize(
    "template",
    [
        "{{ facts.probe.__class__.__init__.__globals__ }}",
        "{{ facts.probe | attr('run') }}",
        "{{ (facts.probe|attr('__class__')).__mro__ }}",
        "{{ labels.__class__.__base__.__subclasses__() }}",
        "{{ lipsum.__globals__['os'].popen('id').read() }}",
        "{{ self._TemplateReference__context }}",
        "{{ ''['__class__'] }}",
    ],
)
def test_climbing_to_python_internals_from_a_template_is_refused(template: str) -> None:
    CALLS.clear()

    with pytest.raises(TemplateError):
        templates.render(template, _context({"Hostname": "gpu-node-01"}))

    assert CALLS == []
