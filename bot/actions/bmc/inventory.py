"""Which BMC belongs to a node, and the credentials to log in with.

A node maps to its BMC through the settings (`bmc.nodes`), or, for nodes not listed there
and when `bmc.annotations` allows it, through annotations on the Kubernetes node:

    runbook-bot/bmc-protocol: redfish        (ipmi | redfish)
    runbook-bot/bmc-address: 10.0.8.12
    runbook-bot/bmc-port: "443"              (optional)
    runbook-bot/bmc-credentials: default     (a profile name from settings, optional)
    runbook-bot/bmc-system: "1"              (Redfish system id, optional)

Never from alert labels: an alert can name a node, not where to send its BMC password.
An annotation names a credentials *profile*; the password itself is only ever read from
the file or environment variable the operator configured for that profile.
"""

from __future__ import annotations

import os
import re

from pydantic import SecretStr, ValidationError

from bot.actions.bmc.protocol import Bmc, BmcTarget, Credentials
from bot.actions.context import ActionContext
from bot.actions.kubernetes import api, marks
from bot.config import BmcNode
from bot.errors import CredentialsRefused, PermanentActionError

ANNOTATION = marks.PREFIX + "bmc-"
KEYS = ("protocol", "address", "port", "credentials", "system")
# `scheme`, `verify_tls` and `ca_file` come only from settings: an annotation cannot turn
# TLS verification off.


def resolve(ctx: ActionContext, node: str) -> BmcTarget:
    """The node's BMC, from settings first, then from its annotations."""
    bmc = ctx.settings.bmc
    entry = bmc.nodes.get(node)
    if entry is not None:
        return _target(node, entry, "settings")
    if not bmc.annotations:
        raise PermanentActionError(
            f"no BMC is known for {node}: add it under bmc.nodes in the settings "
            "(node annotations are switched off by bmc.annotations: false)"
        )
    found = marks.annotations_of(api.read_node(ctx, node))
    values = {k: found[ANNOTATION + k] for k in KEYS if found.get(ANNOTATION + k)}
    if not values:
        raise PermanentActionError(
            f"no BMC is known for {node}: add it under bmc.nodes in the settings, or annotate "
            f"the node with {ANNOTATION}protocol and {ANNOTATION}address (docs/bmc.md)"
        )
    try:
        entry = BmcNode.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{ANNOTATION}{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise PermanentActionError(
            f"the BMC annotations on {node} are invalid: {problems}"
        ) from exc
    if entry.credentials not in bmc.credentials:
        raise PermanentActionError(
            f"{node} names credentials profile {entry.credentials!r} in "
            f"{ANNOTATION}credentials, but bmc.credentials has no such profile"
        )
    return _target(node, entry, "annotations")


def _target(node: str, entry: BmcNode, source: str) -> BmcTarget:
    return BmcTarget(
        node=node,
        protocol=entry.protocol,
        address=entry.address,
        port=entry.port,
        credentials=entry.credentials,
        system=entry.system,
        scheme=entry.scheme,
        cipher_suite=entry.cipher_suite,
        verify_tls=entry.verify_tls,
        ca_file=entry.ca_file,
        source=source,
    )


def credentials(ctx: ActionContext, target: BmcTarget) -> Credentials:
    """Read the password of the target's profile now (a rotated Secret is picked up)."""
    profile = ctx.settings.bmc.credentials.get(target.credentials)
    if profile is None:
        raise CredentialsRefused(
            f"no credentials profile {target.credentials!r} for {target.where()}; define it "
            "under bmc.credentials"
        )
    if profile.password_file is not None:
        try:
            password = profile.password_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise CredentialsRefused(
                f"cannot read the BMC password file of profile {target.credentials!r} "
                f"({profile.password_file}: {exc.strerror}); check the mounted Secret"
            ) from exc
    else:
        password = os.environ.get(profile.password_env or "", "")
    if not password:
        where = profile.password_file or f"${profile.password_env}"
        raise CredentialsRefused(
            f"the BMC password of profile {target.credentials!r} is empty ({where})"
        )
    if re.search(r"[\x00\n\r]", password):
        raise CredentialsRefused(
            f"the BMC password of profile {target.credentials!r} holds a NUL or line break"
        )
    return Credentials(profile.username, SecretStr(password))


def open_bmc(ctx: ActionContext, node: str) -> Bmc:
    """Resolve the node's BMC and open a connection with the protocol it speaks."""
    target = resolve(ctx, node)
    login = credentials(ctx, target)
    timeout = ctx.settings.bmc.timeout.total_seconds()
    if target.protocol == "ipmi":
        from bot.actions.bmc.ipmi import IpmiBmc

        return IpmiBmc(target, login, timeout=timeout)
    from bot.actions.bmc.redfish import RedfishBmc

    return RedfishBmc(target, login, timeout=timeout)
