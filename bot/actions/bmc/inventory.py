"""Which BMC belongs to a node, and the credentials to log in with.

A node maps to its BMC through the settings (`bmc.nodes`), or, for nodes not listed there
and when `bmc.annotations` allows it (off by default), through annotations on the
Kubernetes node:

    runbook-bot/bmc-protocol: redfish        (ipmi | redfish)
    runbook-bot/bmc-address: 10.0.8.12
    runbook-bot/bmc-port: "443"              (optional)
    runbook-bot/bmc-credentials: default     (a profile name from settings, optional)
    runbook-bot/bmc-system: "1"              (Redfish system id, optional)

Never from alert labels: an alert can name a node, not where to send its BMC password.
An annotation names a credentials *profile*; the password itself is only ever read from
the file or environment variable the operator configured for that profile.

A kubelet may annotate its own Node, so an annotated address is untrusted: it is used only
when it is an IP address inside `bmc.allowed_networks` and its profile says
`allow_annotations: true`. Hostnames are refused rather than resolved: what a name
resolves to when checked need not be what it resolves to when ipmitool or httpx connects.
Every refusal happens before the password is read, so nothing is ever sent there.
"""

from __future__ import annotations

import ipaddress
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
            "(node annotations are switched off by bmc.annotations: false; to use them, set it "
            "to true with bmc.allowed_networks, docs/bmc.md)"
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
    profile = bmc.credentials.get(entry.credentials)
    if profile is None:
        raise PermanentActionError(
            f"{node} names credentials profile {entry.credentials!r} in "
            f"{ANNOTATION}credentials, but bmc.credentials has no such profile"
        )
    _check_annotated_address(ctx, node, entry.address)
    if not profile.allow_annotations:
        raise PermanentActionError(
            f"refused to send the login of credentials profile {entry.credentials!r} to "
            f"{entry.address}, the BMC address {node} names in its annotations: the profile "
            f"does not allow annotated nodes; set bmc.credentials.{entry.credentials}."
            f"allow_annotations: true, or list {node} under bmc.nodes"
        )
    return _target(node, entry, "annotations")


def _check_annotated_address(ctx: ActionContext, node: str, address: str) -> None:
    networks = ctx.settings.bmc.allowed_networks
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        raise PermanentActionError(
            f"refused the BMC address {address!r} that {node} names in {ANNOTATION}address: "
            "an annotated BMC must be an IP address inside bmc.allowed_networks (hostnames "
            f"are not resolved); annotate the IP, or list {node} under bmc.nodes"
        ) from None
    if not any(ip in network for network in networks):
        allowed = ", ".join(str(n) for n in networks) or "none"
        raise PermanentActionError(
            f"refused the BMC address {ip} that {node} names in {ANNOTATION}address: it is "
            f"outside bmc.allowed_networks ({allowed}); no credentials were sent. Fix the "
            f"annotation, add the BMC network to bmc.allowed_networks, or list {node} under "
            "bmc.nodes"
        )


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
