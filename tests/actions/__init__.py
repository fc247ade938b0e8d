"""Tests of the action registry and its executors, against the simulated cluster."""
