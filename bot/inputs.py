"""Bounded readers of what a client sends: a request body under a cap, an id in range.

Every route that reads a body reads it through `read_body`: a declared `Content-Length`
over the cap is refused before a byte is read, and a chunked or lying body is refused as
soon as the bytes read pass the cap, so no request holds more than `limit` bytes of memory
whatever it sends. Every number taken from a path, a form or a chat payload goes through
`parse_id`: ASCII digits only (`²` is a digit to `str.isdigit` and `int()` refuses it), at
most ten of them (`int()` of a 5,000-digit string raises), within the integer column.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from bot.errors import PayloadInvalid, PayloadTooLarge

MAX_ID = 2**31 - 1
"""The largest incident number, step run, follow-up or attempt: PostgreSQL's `integer`."""


async def read_body(
    headers: Mapping[str, str], chunks: AsyncIterator[bytes], limit: int, *, hint: str
) -> bytes:
    """The body, at most `limit` bytes; PayloadTooLarge (413) says `hint` (what to do)
    as soon as it is known to be larger, by its `Content-Length` or by what arrived."""
    declared = headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
        raise _too_large(limit, hint)
    body = bytearray()
    async for chunk in chunks:
        body.extend(chunk)
        if len(body) > limit:
            raise _too_large(limit, hint)
    return bytes(body)


def parse_id(raw: object, what: str, *, low: int = 1, high: int = MAX_ID) -> int:
    """`raw` as a number from `low` to `high`; PayloadInvalid (400) names `what` and the
    range otherwise."""
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 10) or not (
        low <= int(text) <= high
    ):
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise PayloadInvalid(f"{what} must be a number from {low} to {high}, not {shown!r}")
    return int(text)


def _too_large(limit: int, hint: str) -> PayloadTooLarge:
    return PayloadTooLarge(f"the body is larger than {limit} bytes; {hint}")
