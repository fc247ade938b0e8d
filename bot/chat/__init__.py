"""Chat surfaces: plain-data views of incidents, rendered by Slack and the web console."""

__all__: list[str] = []
