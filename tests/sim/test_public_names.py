"""`bot.sim` exports exactly its public names, and imports nothing above it."""

from __future__ import annotations

import subprocess
import sys

import bot.sim


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name, value in vars(bot.sim).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("bot.sim")
    }

    assert set(bot.sim.__all__) == public
    assert sorted(bot.sim.__all__) == bot.sim.__all__


def test_importing_the_simulator_pulls_in_no_higher_room() -> None:
    probe = (
        "import sys, bot.sim; "
        "print(sorted(m for m in sys.modules if m.startswith('bot.') "
        "and not m.startswith('bot.sim')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )

    assert result.stdout.strip() == "['bot.clock', 'bot.errors']"
