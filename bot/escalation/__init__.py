"""Escalation: who is paged about an incident nobody handles, when, and how.

- `ladder`: each incident's timers (armed at opening, cancelled by acknowledgement,
  silence and resolution, fired by the worker) and whom each level reaches.
- `oncall`: the rotation, overrides and hand-overs.
- `pager`: delivers queued pages to targets (PagerDuty Events API v2, a signed JSON
  webhook, WeCom / DingTalk / Feishu group robots, SMTP mail); Slack pages go through chat.
- `health`: worker heartbeats and how late the timers are (`/readyz`, `/metrics`).
- `second_level`: who the second level of an incident's policy reaches, when it was
  paged, and paging it now (`page_now`: a first approver asks for the second person).
- `service`: acknowledge and silence with the timers, the policy a new incident freezes.
"""

from bot.escalation.dingtalk import DingTalkTarget
from bot.escalation.email import EmailTarget
from bot.escalation.feishu import FeishuTarget
from bot.escalation.health import Health
from bot.escalation.pagerduty import PagerDutyTarget
from bot.escalation.paging import Delivery, Event, Page, Retry, Severity, Target, deliver
from bot.escalation.second_level import SecondLine, page_now, second_line
from bot.escalation.service import (
    acknowledge,
    acknowledge_by_deciding,
    frozen_policy,
    own,
    silence,
)
from bot.escalation.targets import targets_from
from bot.escalation.webhook import WebhookTarget
from bot.escalation.wecom import WeComTarget
from bot.escalation_settings import TargetSettings

__all__ = [
    "Delivery",
    "DingTalkTarget",
    "EmailTarget",
    "Event",
    "FeishuTarget",
    "Health",
    "Page",
    "PagerDutyTarget",
    "Retry",
    "SecondLine",
    "Severity",
    "Target",
    "TargetSettings",
    "WeComTarget",
    "WebhookTarget",
    "acknowledge",
    "acknowledge_by_deciding",
    "deliver",
    "frozen_policy",
    "own",
    "page_now",
    "second_line",
    "silence",
    "targets_from",
]
