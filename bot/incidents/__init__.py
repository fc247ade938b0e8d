"""Incidents, their alerts, and the append-only, hash-chained incident log.

`bot.alerts` groups webhook alerts into incidents here; people move incidents through the
lifecycle (`lifecycle.py`) with `service.py`; `merging` grows a node incident into its
failure domain's and merges others into it; everything that happens is written through
`log.append`, and `log.verify` proves nothing was edited since.
"""

from bot.incidents import lifecycle, log, merging, service
from bot.incidents.lifecycle import Severity, Status
from bot.incidents.log import SYSTEM, Actor
from bot.incidents.models import Alert, Incident, LogEntry

__all__ = [
    "SYSTEM",
    "Actor",
    "Alert",
    "Incident",
    "LogEntry",
    "Severity",
    "Status",
    "lifecycle",
    "log",
    "merging",
    "service",
]
