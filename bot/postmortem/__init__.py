"""Postmortems: the 5-Why draft built from the incident log, follow-ups with owners and
deadlines, their reminders and the weekly digest, and the stored final postmortem."""
