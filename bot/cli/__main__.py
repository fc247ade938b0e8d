"""`python -m bot.cli`: the `runbook-bot` command."""

from bot.cli import main

raise SystemExit(main())
