"""The Alertmanager webhook contract and intake.

A POST passes `webhook` (credentials, size, content type, schema into `payload` models),
then `ingest` stores it as one transaction: `grouping` picks or opens the incident,
`staging` collects the alert and log rows and writes them in a few statements. Only after
that commit does the web layer answer 200.
"""

from bot.alerts import ingest, payload, webhook
from bot.alerts.ingest import IngestResult
from bot.alerts.payload import WebhookAlert, WebhookPayload

__all__ = ["IngestResult", "WebhookAlert", "WebhookPayload", "ingest", "payload", "webhook"]
