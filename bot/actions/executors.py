"""Imports every executor module so each registers its actions with the registry."""

from bot.actions.kubernetes import nodes  # noqa: F401
