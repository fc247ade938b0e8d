"""runbook-bot: incident-response runbooks for GPU Kubernetes clusters, driven from chat.

Alertmanager opens incidents (`bot.alerts`), every event is written to an append-only,
hash-chained incident log (`bot.incidents`), and people drive the response from chat.
See DESIGN.md for the rooms and how data flows between them.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
