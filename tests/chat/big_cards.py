"""The largest cards the bot is built for, shared by the limits tests and `bench/card.py`:
a hot row of 32 nodes (one domain incident, its cordon over the 32) and a 30-step runbook
(branches the node is not on skipped by their condition, one manual step waiting)."""

from __future__ import annotations

OPEN = {"breaker_max_fraction": 1.0, "breaker_max_nodes": 64, "breaker_global_max_fraction": 1.0}
"""Breakers open enough for a whole row to be cordoned."""

ROW = """\
    id: overheating
    title: Overheating
    version: 1
    match: {alerts: [GPUTemperatureHigh]}
    group_by: [domain.row]
    correlate: {window: 2m, min_nodes: 2}
    steps:
      - id: cordon
        title: Cordon the hot row
        action: k8s.cordon
        for_each: nodes
        max_parallel: 4
        stop_on: never
        with: {node: "{{ node }}", reason: "hot row"}
      - id: facility
        title: Call the facility about the row's cooling
        manual: Call the facility about the row's cooling; say which row and how hot.
"""

BRANCHES = ("application", "informational", "fabric", "thermal", "power", "memory")


def thirty_steps() -> str:
    """30 manual steps with long titles and instructions; four in five are a branch of a
    fault class the incident is not (skipped by `when`), so steps 1-4 are skipped, step 5
    waits for a person and 25 are not reached yet."""
    lines = [
        "id: gpu-xid",
        "title: Thirty steps",
        "version: 1",
        "match: {alerts: [GPUXIDError]}",
        "facts:",
        '  node: "{{ labels.Hostname }}"',
        "  fault: hardware",
        "steps:",
    ]
    for i in range(1, 31):
        branch = BRANCHES[i % len(BRANCHES)]
        lines += [
            f"  - id: step_{i:02d}",
            f'    title: "Step {i:02d} of the {branch} branch: ' + "check and record " * 6 + '"',
            f"    manual: Do step {i:02d} by hand on the node " + "carefully " * 30,
        ]
        if i % 5:
            lines.append(f"    when: facts.fault == '{branch}'")
    return "\n".join(lines) + "\n"
