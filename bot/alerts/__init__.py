"""The Alertmanager webhook contract and intake.

A POST passes `webhook` (credentials, size, content type, schema into `payload` models),
then `ingest` stores it. Alerts of runbooks that correlate by failure domain are split by
`correlation` key; each key's part lands where `joining` says (a node incident, or the
domain's) or on a cause's incident as `symptoms`, collected per incident in `landing`.
The rest is one transaction where `grouping` picks or opens the incident (Alertmanager's
group). `staging` collects the alert and log rows and writes them in a few statements.
Only after the commits does the web layer answer 200. `splitting` is a person splitting
nodes back out of a domain incident.
"""

from bot.alerts import (
    correlation,
    ingest,
    joining,
    landing,
    payload,
    splitting,
    symptoms,
    webhook,
)
from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.alerts.results import IngestResult

__all__ = [
    "IngestResult",
    "WebhookAlert",
    "WebhookPayload",
    "correlation",
    "ingest",
    "joining",
    "landing",
    "payload",
    "splitting",
    "symptoms",
    "webhook",
]
