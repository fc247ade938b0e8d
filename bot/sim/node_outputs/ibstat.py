"""`ibstat` on a node: its HCAs and ports (`-l`, one CA, one port, or all), as
infiniband-diags prints them, with GUIDs and LIDs stable per node."""

from __future__ import annotations

import hashlib

from bot.sim.hardware import IbPort, Machine
from bot.sim.node_outputs.answers import Answer

CAPABILITY_MASK = "0x2651e848"


def render(machine: Machine, args: list[str]) -> Answer:
    names = [a for a in args if not a.startswith("-")]
    hcas: dict[str, list[IbPort]] = {}
    for each in machine.ib_ports:
        hcas.setdefault(each.hca, []).append(each)
    if "-l" in args or "--list_of_cas" in args:
        return Answer("".join(f"{hca}\n" for hca in hcas), seconds=0.3)
    if names and names[0] not in hcas:
        return Answer(
            f"ibpanic: [4711] main: '{names[0]}' IB device can't be found\n",
            exit_code=255,
            seconds=0.3,
        )
    if len(names) > 1:
        hca, number = names[0], names[1]
        port = next((p for p in hcas[hca] if str(p.port) == number), None)
        if port is None:
            return Answer(
                f"ibwarn: [4711] ca_stat: CA: '{hca}' has no port number {number} - max "
                f"({len(hcas[hca])})\nibpanic: [4711] main: stat of IB device '{hca}' failed\n",
                exit_code=255,
                seconds=0.3,
            )
        text = f"CA: '{hca}'\n" + _port_block(machine.node, port, indent="")
        return Answer(text, seconds=0.3)
    shown = {names[0]: hcas[names[0]]} if names else hcas
    return Answer("".join(_ca_block(machine.node, h, p) for h, p in shown.items()), seconds=0.3)


def _guid(node: str, hca: str) -> str:
    return "0x043f7203" + hashlib.sha256(f"{node}/{hca}".encode()).hexdigest()[:8]


def _ca_block(node: str, hca: str, ports: list[IbPort]) -> str:
    fast = max(p.rate for p in ports) >= 400
    lines = [
        f"CA '{hca}'",
        f"\tCA type: {'MT4129' if fast else 'MT4123'}",
        f"\tNumber of ports: {len(ports)}",
        f"\tFirmware version: {'28' if fast else '20'}.39.1002",
        "\tHardware version: 0",
        f"\tNode GUID: {_guid(node, hca)}",
        f"\tSystem image GUID: {_guid(node, hca)}",
    ]
    return "".join(line + "\n" for line in lines) + "".join(
        _port_block(node, p, indent="\t") for p in ports
    )


def _port_block(node: str, port: IbPort, *, indent: str) -> str:
    lid = (
        2
        + int(hashlib.sha256(f"{node}/{port.hca}/{port.port}".encode()).hexdigest()[:4], 16) % 1500
    )
    pre = indent + "\t" if indent else ""
    facts = [
        ("State", "Active" if port.up else "Down"),
        ("Physical state", "LinkUp" if port.up else "Polling"),
        ("Rate", str(port.rate) if port.up else "10"),
        ("Base lid", str(lid) if port.up else "65535"),
        ("LMC", "0"),
        ("SM lid", "1" if port.up else "0"),
        ("Capability mask", CAPABILITY_MASK),
        ("Port GUID", _guid(node, port.hca)),
        ("Link layer", "InfiniBand"),
    ]
    return f"{indent}Port {port.port}:\n" + "".join(f"{pre}{k}: {v}\n" for k, v in facts)
