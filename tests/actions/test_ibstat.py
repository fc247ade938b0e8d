"""The `ibstat` parser against output in infiniband-diags' exact format (tests/fixtures/ibstat):
adapters, ports, rates, the one-port form, and faulty variants edited from copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.actions.infiniband import ibstat

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ibstat"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def ports(adapters: list[ibstat.Adapter]) -> list[tuple[str, str | None, str | None, float | None]]:
    return [
        (ibstat.port_name(a, p), p.state, p.physical_state, p.rate)
        for a in adapters
        for p in a.ports
    ]


def test_healthy_hdr_node_gives_every_adapter_and_port() -> None:
    adapters = ibstat.parse(fixture("ibstat-hdr200.txt"))

    assert [a.name for a in adapters] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4"]
    first = adapters[0]
    assert (first.kind, first.ca_type, first.number_of_ports) == ("CA", "MT4123", 1)
    assert (first.firmware_version, first.hardware_version) == ("20.39.1002", "0")
    assert first.node_guid == first.system_image_guid == "0xb83fd20300e4a1c2"
    [port] = first.ports
    assert (port.number, port.state, port.physical_state, port.rate) == (1, "Active", "LinkUp", 200)
    assert (port.base_lid, port.lmc, port.sm_lid) == (17, 0, 1)
    assert (port.capability_mask, port.port_guid) == ("0x2651e848", "0xb83fd20300e4a1c2")
    assert port.link_layer == "InfiniBand" and port.infiniband
    assert ports(adapters)[:4] == [(f"mlx5_{i}/1", "Active", "LinkUp", 200) for i in range(4)]
    ethernet = adapters[4].ports[0]
    assert (ethernet.link_layer, ethernet.infiniband, ethernet.rate) == ("Ethernet", False, 100)


def test_a_down_port_and_a_port_at_half_rate() -> None:
    adapters = ibstat.parse(fixture("ibstat-port-down.txt"))

    assert ports(adapters)[2:4] == [
        ("mlx5_2/1", "Down", "Polling", 10),
        ("mlx5_3/1", "Active", "LinkUp", 100),
    ]
    assert (adapters[2].ports[0].base_lid, adapters[2].ports[0].sm_lid) == (65535, 0)


def test_the_one_port_form_has_no_indentation() -> None:
    [adapter] = ibstat.parse(fixture("ibstat-mlx5_2-1.txt"))

    assert (adapter.name, adapter.ca_type) == ("mlx5_2", None)
    assert ports([adapter]) == [("mlx5_2/1", "Initializing", "LinkUp", 200)]


@pytest.mark.parametrize(
    ("rate", "value", "note", "shown"),
    [("2.5", 2.5, None, "2.5"), ("40 (FDR10)", 40, "FDR10", "40"), ("400", 400, None, "400")],
)
def test_rates_as_ibstat_prints_them(rate: str, value: float, note: str | None, shown: str) -> None:
    text = fixture("ibstat-hdr200.txt").replace("Rate: 200", f"Rate: {rate}", 1)

    port = ibstat.parse(text)[0].ports[0]

    assert (port.rate, port.rate_note, port.rate_text) == (value, note, shown)


def test_a_two_port_adapter_keeps_its_ports_apart() -> None:
    one = fixture("ibstat-mlx5_2-1.txt").splitlines()[1:]
    second = "".join(
        "\t" + line.replace("Port 1:", "Port 2:") + "\n"
        if line.startswith("Port")
        else "\t\t" + line + "\n"
        for line in one
    )
    text = fixture("ibstat-hdr200.txt").replace(
        "CA 'mlx5_1'", second.rstrip("\n") + "\nCA 'mlx5_1'"
    )

    adapter = ibstat.parse(text)[0]

    assert [(p.number, p.state) for p in adapter.ports] == [(1, "Active"), (2, "Initializing")]


def test_no_adapters_is_an_empty_list() -> None:
    assert ibstat.parse("") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ibpanic: [1234] main: can't list IB device names\n", "line 1: expected CA '<name>'"),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tRate: fast\n", "line 3: Rate is not a number: 'fast'"),
        ("CA 'mlx5_0'\n\tPort 1:\n\t\tBase lid: none\n", "line 3: base_lid is not a number"),
        ("CA 'mlx5_0'\n\tgarbage\n", "line 2: not 'key: value'"),
    ],
)
def test_malformed_output_is_refused_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ibstat.parse(text)
