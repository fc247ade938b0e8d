"""Tests of the simulated cluster (`bot.sim`) through the real client, kubectl and HTTP."""
