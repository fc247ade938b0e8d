"""The words incident lists are filtered by: one definition for the CLI (`incidents list
--status`), the API (`GET /api/incidents?status=`) and the console's list.

Besides the stored statuses and severities, `active` means open or acknowledged (what
needs someone: the console's default) and `all` means no filter. A word that is none of
these is refused, naming the words there are: a filter that silently matches nothing
would answer "no incidents" while some are open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bot.errors import RequestRejected
from bot.incidents.lifecycle import Severity, Status

ALL = "all"
ACTIVE = "active"

STATUSES: Mapping[str, tuple[str, ...]] = {
    ACTIVE: tuple(status.value for status in Status if status.active),
    ALL: (),
    **{status.value: (status.value,) for status in Status},
}
"""Each status word -> the stored statuses it stands for (none: every status)."""
SEVERITIES: Mapping[str, tuple[str, ...]] = {
    ALL: (),
    **{severity.value: (severity.value,) for severity in Severity},
}
"""Each severity word -> the stored severities it stands for (none: every severity)."""


def statuses(words: Iterable[str]) -> tuple[str, ...]:
    """The stored statuses `words` stand for; () for no filter (no words, or `all`)."""
    return _meaning("status", STATUSES, words)


def severities(words: Iterable[str]) -> tuple[str, ...]:
    """The stored severities `words` stand for; () for no filter (no words, or `all`)."""
    return _meaning("severity", SEVERITIES, words)


def _meaning(
    kind: str, known: Mapping[str, tuple[str, ...]], words: Iterable[str]
) -> tuple[str, ...]:
    chosen: list[str] = []
    everything = False
    for word in words:
        meant = known.get(word.strip().lower())
        if meant is None:
            raise RequestRejected(
                f"unknown {kind} {word!r}: use one of {', '.join(known)}", field=kind
            )
        everything = everything or not meant
        chosen += [value for value in meant if value not in chosen]
    return () if everything else tuple(chosen)
