"""The security checks reuse the runbook suite's `drive` fixture: the shipped runbooks
behind the served webhook, the simulated cluster with Redfish BMCs, and a worker."""

from __future__ import annotations

from tests.runbooks.conftest import drive

__all__ = ["drive"]
