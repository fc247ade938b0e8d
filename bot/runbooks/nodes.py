"""The nodes an incident is about: those its alerts name (`topology.node_labels`), for
templates (`incident.nodes`) and for steps that run over many nodes (`for_each: nodes`)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.incidents.models import Alert
from bot.topology import nodes_of
from bot.topology_settings import TopologySettings


def incident_nodes(session: Session, number: int, settings: TopologySettings) -> list[str]:
    """The distinct nodes the incident's alerts name, sorted (resolved alerts included: a
    node that recovered by itself is still one the incident was about)."""
    labels = session.scalars(select(Alert.labels).where(Alert.incident_number == number))
    return nodes_of(settings, labels)
