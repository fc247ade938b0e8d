"""People: who decides, and through which channel.

The settings name the people (`people`, and the older `roles` and console users); the
`Directory` built from them resolves an identity (a Slack user id, a console login, an
e-mail address, a trusted proxy's user name, a person id) to one `Person`, who is one
approver whatever channel they come through. A request that decides becomes a `Decider`
(the person, the channel, the identity it came with), which the log records. Personal API
tokens (`tokens`) authenticate the HTTP API as their owner.
"""

from bot.people.directory import ROLE_ORDER, Channel, Decider, Directory, Identity, Person, ordered

__all__ = ["ROLE_ORDER", "Channel", "Decider", "Directory", "Identity", "Person", "ordered"]
