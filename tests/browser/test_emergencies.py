"""The demo's other four emergencies, each walked to its end in the console as the people
on call would: `oncall` on a phone decides, `second` on a desktop gives the second
approval of two-person steps. Each test ends with the runbook settled, the incident
resolved with a disposition, the cluster as the runbook left it (read through the
simulator's API and BMCs) and every decision in the incident's log. On the way, oncall's
four viewing combinations (phone/desktop, light/dark: `viewing.Viewers`, extra contexts on
the same demo) look at the first decision, the two-person moment and the resolved card:
the decision on the first screen, every key text at AA contrast.

(XID 79, the first emergency, has its own test with screenshots: test_xid_incident.py.)
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import expect

from tests.browser import walking
from tests.browser.cluster import Simulator
from tests.browser.conftest import DemoOf, NewPage, ViewersOf
from tests.browser.console import step
from tests.browser.walking import Night, approve, done, settle_and_resolve, skip, two, walk

OnCall = Callable[[str], Night]

pytestmark = pytest.mark.timeout(300)
"""A walk waits for the bot's own minute of a node Ready, and looks at four views on the way."""


@pytest.fixture
def on_call(demo_of: DemoOf, new_page: NewPage, viewers: ViewersOf) -> OnCall:
    """(scenario) -> its demo's incident, open for `oncall` (phone) and `second` (desktop),
    with oncall's four viewing combinations."""

    def start(scenario: str) -> Night:
        demo = demo_of(scenario)
        return walking.on_call(demo, new_page, viewers(demo))

    return start


def test_node_down_is_read_off_cordoned_tainted_powered_on_verified_and_returned_by_two(
    on_call: OnCall,
) -> None:
    night = on_call("node-down")
    node = "gpu-node-04"
    # The alert came once the machine was off and the node NotReady: the bot read both.
    night.shows("node_status", f"{node}: Ready=False")
    night.shows("power", f"{node} is powered off")
    decisions = [
        approve("cordon"),
        two("out_of_service"),
        done("checkpoints", "trainer-3 runs again from the 02:10 checkpoint"),
        approve("remove_out_of_service"),
        approve("power_on"),
        skip("vendor"),  # its first crash
        approve("drain"),
        approve("diag"),
        done("burn_in", "2 h all_reduce_perf on 8 GPUs: no XID, no job failure"),
        two("uncordon"),
    ]
    walk(night, decisions, targets=node)
    night.shows("diag", "dcgmi diag -r 3 passed")
    settle_and_resolve(night, decisions, "gpu-node-04 lost power; powered on, verified")

    with Simulator(night.demo) as sim:
        assert (sim.power(node), sim.ready(node), sim.cordoned(node)) == ("On", "True", False)
        assert sim.taints(node) == set()  # the out-of-service taint came and went
        assert sim.pods("ml")["trainer-3"] not in ("", node)  # drained before diagnostics


def test_ib_port_down_drains_the_node_and_keeps_it_out_while_the_port_stays_down(
    on_call: OnCall,
) -> None:
    night = on_call("ib-partition")
    node = "gpu-node-03"
    night.shows("ports", "mlx5_1/1: State Down")
    decisions = [
        done("check_node", "mlx5_1/1: no light on the module; the cable is the suspect"),
        approve("cordon"),
        approve("drain"),
        done("replace_cable", "replaced the mlx5_1 cable and module"),
        done("error_counters", "counters read and cleared"),
        # The simulator has no hands: the port is still down when the bot checks again.
        done("ports_still_bad", "handed to the network vendor"),
    ]
    walk(night, decisions, targets=node)
    night.shows("verify_ports", "mlx5_1/1: State Down")
    expect(step(night.phone, "uncordon")).to_have_attribute("data-state", "skipped")
    settle_and_resolve(night, decisions, "gpu-node-03 out until the vendor fixes mlx5_1")

    with Simulator(night.demo) as sim:
        assert (sim.power(node), sim.ready(node), sim.cordoned(node)) == ("On", "True", True)
        assert node not in sim.pods("ml").values()  # drained, and kept out
        assert node not in sim.pods("serving").values()


def test_storage_outage_closes_the_queue_until_read_write_and_resume_are_verified(
    on_call: OnCall,
) -> None:
    night = on_call("storage")
    night.shows("impact_mounts", "nfs.storage.svc.cluster.local")
    decisions = [
        done("checkpoint_writable", "not writable: touch in /datasets hangs in ml/trainer-0"),
        approve("close_queue"),
        skip("client_mount"),  # one node reports it, but the server is what failed
        done("nfs_server", "nfsd restarted on the server; exports back"),
        done("rw_test", "fio 4 GB write and read back: 1.2 GB/s"),
        done("resume_check", "trainer resumed from its newest checkpoint"),
        skip("data_loss"),  # nothing was lost
        approve("reopen_queue"),
    ]
    walk(night, decisions, targets="default")
    night.shows("reopen_queue", "Closed -> Open")
    settle_and_resolve(night, decisions, "NFS server restarted; queue reopened")

    with Simulator(night.demo) as sim:
        assert sim.queue_state("default") == "Open"
        nodes = [f"gpu-node-0{i}" for i in range(1, 5)]
        assert [sim.cordoned(n) for n in nodes] == [False] * 4  # no node was touched


def test_one_hot_gpu_with_healthy_fans_stays_in_service_and_goes_to_the_vendor(
    on_call: OnCall,
) -> None:
    night = on_call("overheating")
    node = "gpu-node-01"
    night.shows("temperatures", "GPU3 Temp 93")
    night.shows("fans", "all ok")
    decisions = [skip("replace_fan")]  # the fans are fine: the runbook says skip, call the vendor
    walk(night, decisions, targets=node)
    night.shows("temperatures_after", "GPU3 Temp 93")
    settle_and_resolve(night, decisions, "fans fine; vendor case for GPU 3 of gpu-node-01")

    with Simulator(night.demo) as sim:
        assert (sim.power(node), sim.cordoned(node)) == ("On", False)
        assert sim.gpu_sensor(node, 3)["ReadingCelsius"] == 93  # nobody cooled it down
