"""Paging targets: how the second line hears about an incident nobody acknowledged.

The escalation engine (which decides *when* to page) builds a `Page` from an incident and
calls `send` on each `Target` of the level it reached; each target turns the page into its
service's wire format (PagerDuty Events API v2, a signed JSON webhook, WeCom / DingTalk /
Feishu group robots, SMTP mail), retries what may succeed later, and returns a `Delivery`.
Targets are built from settings by `targets_from`; no database and no chat here, so the
engine and the worker wire them in (chat implements the same `Target` protocol for Slack).
"""

from bot.escalation.dingtalk import DingTalkTarget
from bot.escalation.email import EmailTarget
from bot.escalation.feishu import FeishuTarget
from bot.escalation.pagerduty import PagerDutyTarget
from bot.escalation.paging import Delivery, Event, Page, Retry, Severity, Target, deliver
from bot.escalation.settings import TargetSettings
from bot.escalation.targets import targets_from
from bot.escalation.webhook import WebhookTarget
from bot.escalation.wecom import WeComTarget

__all__ = [
    "Delivery",
    "DingTalkTarget",
    "EmailTarget",
    "Event",
    "FeishuTarget",
    "Page",
    "PagerDutyTarget",
    "Retry",
    "Severity",
    "Target",
    "TargetSettings",
    "WeComTarget",
    "WebhookTarget",
    "deliver",
    "targets_from",
]
