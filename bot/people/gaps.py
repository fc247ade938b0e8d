"""What `serve` warns about at start: settings under which no person can decide.

Both are legal (a read-only start, a first start before people are added), so they are
log lines, not errors: nobody holds a role (every step but `auto` waits forever), and
nobody can sign in to the console (no user, no admin token, no trusted proxy).
"""

from __future__ import annotations

from bot.config import Settings
from bot.people.directory import Directory


def gaps(settings: Settings) -> list[str]:
    """One line per way in which nobody can decide."""
    found = []
    if not Directory(settings).anyone_decides and not settings.slack_role_groups:
        found.append(
            "nobody holds a role (people, roles, console.users, slack_role_groups are "
            "empty of roles): only `auto` steps run and nobody can approve the rest; add "
            "people with roles (docs/security.md)"
        )
    console = settings.console
    if (
        console.enabled
        and not console.users
        and console.secret("admin_token") is None
        and not console.trusted_proxies
    ):
        found.append(
            "no console user exists (console.users, console.admin_token and "
            "console.trusted_proxies are unset): nobody can sign in to the console; add a "
            "user with `runbook-bot console hash-password` (docs/console.md)"
        )
    return found
