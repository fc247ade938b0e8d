"""Kubernetes actions through the official client: nodes, pods, drain, node Jobs, Volcano.

Every executor goes through `bot.actions.cluster.call` (timeouts, bounded retries, errors
translated once), marks what the bot changed with `marks` annotations, and asks the
`breaker` before taking another GPU node out of service.
"""
