"""The built-in web console: the incident list, one page per incident with its card and
buttons, the live log, follow-ups and the postmortem draft, served by the bot at `/`.

A request flows: `routes` (Starlette, thin) reads the session cookie (`sessions`), finds
the user (`auth`), reads what the page shows through `pages` (the same `bot.chat.cards`
views Slack renders) and renders it with `render` (Jinja2, autoescaped, templates and
static files inside the package). A button is a POST with the session's CSRF token; it is
checked, then `buttons` decides it through `bot.chat.decisions`, the code Slack's
buttons run, so the role checks are the same; its answer is shown in the block of the
control pressed. `waiting` says, for the list, what waits for whom. Pages and messages
for console users are stored by `chat.ConsoleChat` and shown to them.
`headers.SecurityHeaders`, a middleware around the whole app, gives every response its
security headers (CSP, no framing, no sniffing).
"""

from __future__ import annotations

from bot.chat.console.chat import BothChats, ConsoleChat
from bot.chat.console.headers import SecurityHeaders
from bot.chat.console.routes import console_routes

__all__ = ["BothChats", "ConsoleChat", "SecurityHeaders", "console_routes"]
