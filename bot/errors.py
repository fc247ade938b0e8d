"""Every error a user can act on, in one tree.

    BotError                      base; `str(err)` says what happened and what to do
    ├── ConfigInvalid             settings failed validation at start
    ├── StorageUnavailable        the database cannot be reached (retry later; HTTP 503)
    ├── MigrationsPending         the database schema is behind the code
    ├── RequestRejected           an inbound request is bad (carries its HTTP status)
    │   ├── Unauthorized          401: missing or wrong credentials
    │   ├── PayloadTooLarge       413: body above the configured limit
    │   ├── UnsupportedMediaType  415: not JSON
    │   └── PayloadInvalid        400: not JSON, or not the Alertmanager v4 schema
    ├── PersonUnknown             no person in the settings has that id (CLI exit 2)
    ├── IncidentNotFound          no incident with that number
    ├── TransitionRefused         the lifecycle does not allow that change now
    ├── StepNotFound              the incident has no runbook, or no such step
    ├── ApprovalRefused           this approval does not count (no role, twice, params changed)
    │   ├── ApprovalExpired       the step waited longer than approval_ttl
    │   └── ProposalSuperseded    a step over many nodes: the incident's node list changed
    ├── LogTampered               the incident log does not verify
    ├── RunbookInvalid            runbook files have problems (bot.runbooks.loader; each
    │                             with file:line:column)
    ├── TemplateError             a runbook template does not parse, render, or is refused
    │                             by the sandbox (bot.runbooks.templates)
    ├── ActionUnknown             no registered action has that name
    ├── ParamsInvalid             action parameters failed their model (no call was made)
    ├── ActionError               an action failed; the class carries the retry decision
    │   │                         and the failure's `kind`, which runbooks branch on
    │   ├── PermanentActionError  retrying will not help (refused, forbidden, not found)
    │   │   ├── BreakerOpen       the circuit breaker refuses more cordoned GPU nodes
    │   │   ├── ActionCancelled   the run was cancelled (its step timed out): nothing more
    │   │   │                     is done on its behalf
    │   │   └── CredentialsRefused  the target refused the login (wrong password, unknown
    │   │                         user, too few rights) or the profile cannot be read
    │   └── TemporaryActionError  may succeed later; `delay` says when to try again
    ├── ChatError                 a chat call failed (Slack)
    │   ├── ChatRefused           the chat service said no (bad token, no such channel)
    │   └── ChatUnavailable       it may work later (429, 5xx, timeout); `delay` says when
    └── PageError                 a paging target failed (bot.escalation); names the target
        ├── PageRefused           the target said no (key, payload, recipient): do not retry
        └── PageUnavailable       it may work later (429, 5xx, timeout, robot rate limit)

Callers decide by class, never by message text.
"""

from __future__ import annotations


class BotError(Exception):
    """Base of every runbook-bot error."""


class ConfigInvalid(BotError):
    """Settings failed validation; the message names each setting and the problem."""


class StorageUnavailable(BotError):
    """The database could not be reached or is locked; the operation may be retried."""


class MigrationsPending(BotError):
    """The database schema is not at the revision this code expects."""


class RequestRejected(BotError):
    """An inbound HTTP request was refused; `status` is the HTTP status to answer with."""

    status: int = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class PersonUnknown(BotError):
    """`--as` (or a token's owner) names no person the settings know."""


class Unauthorized(RequestRejected):
    status = 401


class PayloadTooLarge(RequestRejected):
    status = 413


class UnsupportedMediaType(RequestRejected):
    status = 415


class PayloadInvalid(RequestRejected):
    status = 400


class IncidentNotFound(BotError):
    """No incident has the requested number."""


class TransitionRefused(BotError):
    """The incident's lifecycle does not allow the requested change in its current state."""


class StepNotFound(BotError):
    """The incident follows no runbook, or its runbook has no step by that id."""


class ApprovalRefused(BotError):
    """An approval (or skip, or done) was not accepted; the message says why and what to do."""


class ApprovalExpired(ApprovalRefused):
    """The step waited longer than `approval_ttl` for its approvals; it must be re-proposed."""


class ProposalSuperseded(ApprovalRefused):
    """A step over many nodes was proposed for a node list that is no longer the
    incident's; it is proposed again over the new list and approvals start again."""


class LogTampered(BotError):
    """An incident log entry does not verify against the hash chain."""


class ActionUnknown(BotError):
    """No registered action has that name; the message suggests the closest one."""


class ParamsInvalid(BotError):
    """Action parameters failed validation; nothing was called."""


class ActionError(BotError):
    """An action could not do its work; `str(err)` is the reason a human can act on.

    `kind` names the failure for runbooks (`steps.power.error.kind == "credentials"`):
    each class says its own, so no caller reads the message to tell them apart."""

    kind: str = "other"


class PermanentActionError(ActionError):
    """Retrying will not help: the target refused, is missing, or we are not allowed."""

    kind = "refused"


class CredentialsRefused(PermanentActionError):
    """The target would not let us in: it refused the login (wrong password, unknown user)
    or the account's rights, or the credentials profile could not be read. The message
    names the profile to fix, never a secret."""

    kind = "credentials"


class BreakerOpen(PermanentActionError):
    """The circuit breaker refuses to take more GPU nodes out of service."""


class ActionCancelled(PermanentActionError):
    """The action's run was cancelled (its step timed out, the step moved on): it stops at
    its next call to the cluster or a BMC instead of acting for a step that is over."""

    kind = "cancelled"


class TemporaryActionError(ActionError):
    """The action may succeed later (API throttled, timeout); retry after `delay` seconds."""

    kind = "unavailable"

    def __init__(self, message: str, *, delay: float = 5.0) -> None:
        super().__init__(message)
        self.delay = delay


class ChatError(BotError):
    """A chat call (Slack) failed; the message names the method and what to check."""


class ChatRefused(ChatError):
    """The chat service refused the call; sending it again will not help."""


class ChatUnavailable(ChatError):
    """The chat service throttled us, failed or did not answer; try again after `delay`
    seconds (a 429's Retry-After when it gave one)."""

    def __init__(self, message: str, *, delay: float = 5.0, throttled: bool = False) -> None:
        super().__init__(message)
        self.delay = delay
        self.throttled = throttled


class PageError(BotError):
    """A paging target (PagerDuty, webhook, robot, mail) failed; the message names the
    target, what happened and what to check, and never a key, token or password."""


class PageRefused(PageError):
    """The target refused the page (bad key, invalid payload, refused recipient); sending
    the same page again will not help."""


class PageUnavailable(PageError):
    """The target throttled us, failed or did not answer; try again after `delay` seconds
    (its Retry-After when it gave one)."""

    def __init__(self, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay
