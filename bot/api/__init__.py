"""The HTTP API's shapes: what requests carry (`requests`) and what answers hold (`models`).

`bot.web` builds every JSON answer from a model in `models` and parses decision bodies with
`requests.parse`; `bot.openapi` generates the document served at `/openapi.json` from the
same models, so the document and the wire cannot drift apart.
"""

from bot.api import models, requests, splits

__all__ = ["models", "requests", "splits"]
