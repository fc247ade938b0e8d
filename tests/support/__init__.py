"""Test support: databases, a live server, payload builders, loopback peers, CI guards."""
