"""The shipped runbooks (`runbooks/`): each loads into the schema and the validator finds
nothing; actions, parameters, result fields and approvals fit the registry; each seed plan
is quoted and its numbered steps appear in order; and each runbook, walked step by step
over scenarios with the real template sandbox and action models, takes the branch the
seed asks for."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.actions import ActionContext, Params, Result, execute, registry
from bot.actions.bmc.reads import PowerStatus
from bot.actions.executing import Failure
from bot.actions.gpu.diag import GpuDiag
from bot.actions.gpu.history import FaultHistory, RepeatHit
from bot.actions.infiniband.ports import IbPortStatus
from bot.actions.kubernetes.nodes import NodeStatus
from bot.config import load_settings
from bot.durations import parse_duration
from bot.errors import ParamsInvalid
from bot.runbooks import engine, templates
from bot.runbooks.catalog import Catalog
from bot.runbooks.loader import load_paths
from bot.runbooks.schema import APPROVALS, LocalizedText, Runbook, Step
from bot.runbooks.steps import StepState
from bot.topology import nodes_of
from bot.topology_settings import TopologySettings
from tests.support.payloads import fixture

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
FILES = sorted(RUNBOOKS.glob("*.yaml"))
SCHEMA_LINE = "# yaml-language-server: $schema=../docs/runbook.schema.json"

# Seed 34.3, line by line: (the heading a step's doc cites, the seed's whole line).
SEED_PLANS: dict[str, list[tuple[str, str]]] = {
    "gpu-xid": [
        ("1. 定位", "1. 定位：确认节点与卡号，查 XID 码对照表判断类型"),
        ("2. 止血", "2. 止血：kubectl cordon 该节点；该卡上的任务 eviction/重排到健康节点"),
        ("3. 尝试恢复", "3. 尝试恢复：nvidia-smi --gpu-reset（需卡空闲）或重启节点"),
        (
            "4. 验证",
            "4. 验证：dcgmi diag -r 2 通过 → uncordon；反复掉卡（一周 ≥2 次）→ 走 RMA 换卡，"
            "节点保持 cordon 直到更换",
        ),
    ],
    "node-down": [
        ("1. BMC 带外确认", "1. BMC 带外确认：电源状态、SEL 日志（ipmitool sel list）"),
        (
            "2. 业务侧",
            "2. 业务侧：确认任务已被 K8s 重排（训练任务靠 checkpoint 恢复，检查最近 ckpt 时间）",
        ),
        (
            "3. 硬件侧",
            "3. 硬件侧：能远程重启则重启观察；反复宕机 → 联系 IDC/厂商，重点怀疑电源/主板；"
            "恢复后全量诊断（dcgmi diag -r 3）+ 2h 压测 → 重新上线",
        ),
    ],
    "ib-partition": [
        (
            "1. 范围判定",
            "1. 范围判定：单机还是全网？单机 → 查本机线缆/网卡；"
            "全网 → 查交换机/子网管理器（opensm）",
        ),
        ("2. 止血", "2. 止血：cord off 受影响节点，任务迁移到网络健康分区"),
        ("3. 修复", "3. 修复：更换线缆/模块、重启 opensm、检查端口误码计数"),
        ("4. 验证", "4. 验证：ib_write_bw + 双机 nccl-tests 达标后恢复"),
    ],
    "storage-failure": [
        ("1. 影响面", "1. 影响面：哪些节点/任务挂载受影响；checkpoint 是否可写（最关键！）"),
        ("2. 止血", "2. 止血：暂停新任务调度（临时 cordon 或调低队列配额），防止故障放大"),
        ("3. 处置", "3. 处置：NFS → 服务端排查；JuiceFS → 查元数据引擎与对象存储连通性"),
        (
            "4. 恢复验证",
            "4. 恢复验证：读写压测 + 确认任务可从最近 checkpoint 续跑；若丢数据 → 启用备份恢复，"
            "评估丢失的 ckpt 时间窗并通知业务方",
        ),
    ],
    "overheating": [
        ("1. 确认范围", "1. 确认范围：单机（风扇故障）还是整排（空调故障）"),
        (
            "2. 整排高温",
            "2. 整排高温 → 按优先级 graceful 停掉低优先级任务保核心在线；逼近阈值 → 有序关机"
            "（先 drain 再 shutdown）",
        ),
        ("3. 单机高温", "3. 单机高温 → 检查风扇转速（ipmitool sensor | grep -i fan），备件更换"),
        ("4. 恢复后逐批上电", "4. 恢复后逐批上电，观察温度回落再放量"),
    ],
}
RESULT_FIELD = re.compile(r"steps\.([a-z0-9_]+)\.result\.([a-z_]+)")


def _load(name: str) -> Runbook:
    return Runbook.model_validate(yaml.safe_load((RUNBOOKS / f"{name}.yaml").read_text()))


def _steps() -> list[tuple[str, Step]]:
    return [(path.stem, step) for path in FILES for step in _load(path.stem).steps]


# -- what every runbook must satisfy ---------------------------------------------------------


def test_the_five_seed_runbooks_and_the_fallback_are_shipped() -> None:
    assert [path.stem for path in FILES] == [
        "default",
        "gpu-xid",
        "ib-partition",
        "node-down",
        "overheating",
        "storage-failure",
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_file_loads_into_the_schema_under_its_own_id_with_the_editor_schema_line(
    path: Path,
) -> None:
    text = path.read_text(encoding="utf-8")

    runbook = Runbook.model_validate(yaml.safe_load(text))

    assert text.splitlines()[0] == SCHEMA_LINE
    assert runbook.id == path.stem
    assert isinstance(runbook.title, LocalizedText)
    assert runbook.title.en and runbook.title.zh


def test_the_validator_finds_no_problem_with_the_shipped_runbooks() -> None:
    from bot.runbooks.validate import validate_paths

    assert validate_paths([RUNBOOKS]) == []


def test_exactly_one_runbook_is_the_fallback_and_it_only_reads() -> None:
    fallbacks = [path.stem for path in FILES if _load(path.stem).match.fallback]

    assert fallbacks == ["default"]
    risks = {registry.get(s.action).risk.value for s in _load("default").steps if s.action}
    assert risks == {"read"}


@pytest.mark.parametrize(("runbook", "step"), _steps(), ids=lambda v: getattr(v, "id", v))
def test_each_step_names_a_registered_action_with_only_its_parameters(
    runbook: str, step: Step
) -> None:
    if step.action is None:
        assert step.manual is not None and not step.with_
        return
    action = registry.get(step.action)
    assert set(step.with_) <= set(action.params.model_fields), f"{runbook}/{step.id}"


@pytest.mark.parametrize(("runbook", "step"), _steps(), ids=lambda v: getattr(v, "id", v))
def test_no_step_asks_fewer_approvals_than_its_actions_risk(runbook: str, step: Step) -> None:
    if step.action is None:
        return
    needed = registry.get(step.action).risk.approvals
    given = APPROVALS[step.approval] if step.approval else needed

    assert given >= needed, f"{runbook}/{step.id}: {step.approval} < {step.action}'s risk"


@pytest.mark.parametrize(("runbook", "step"), _steps(), ids=lambda v: getattr(v, "id", v))
def test_result_fields_a_step_reads_exist_on_that_actions_result_model(
    runbook: str, step: Step
) -> None:
    by_id = {s.id: s for s in _load(runbook).steps}
    sources = [step.when or "", *(v for v in step.with_.values() if isinstance(v, str))]

    for source in sources:
        for step_id, name in RESULT_FIELD.findall(source):
            earlier = by_id[step_id]
            assert earlier.action is not None, f"{runbook}/{step.id}: {step_id} has no result"
            model = registry.get(earlier.action).result
            assert name in model.model_fields, f"{runbook}/{step.id}: {model.__name__}.{name}"


@pytest.mark.parametrize(("runbook", "step"), _steps(), ids=lambda v: getattr(v, "id", v))
def test_a_step_outlasts_the_wait_it_gives_its_action_and_has_a_doc_in_both_languages(
    runbook: str, step: Step
) -> None:
    if isinstance(step.with_.get("timeout"), str):
        assert step.timeout is not None
        assert step.timeout > parse_duration(step.with_["timeout"]), f"{runbook}/{step.id}"
    assert step.doc, f"{runbook}/{step.id}"
    assert isinstance(step.title, LocalizedText) and step.title.en and step.title.zh
    if step.manual is not None:
        assert isinstance(step.manual, LocalizedText) and step.manual.en and step.manual.zh


@pytest.mark.parametrize("name", SEED_PLANS)
def test_the_seed_plan_is_quoted_and_each_numbered_step_appears_in_order(name: str) -> None:
    text = (RUNBOOKS / f"{name}.yaml").read_text(encoding="utf-8")
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    headings = [heading for heading, _ in SEED_PLANS[name]]

    primaries = []
    for step in _load(name).steps:
        cited = {h: step.doc.find(h) for h in headings if step.doc and h in step.doc}
        assert cited, f"{name}/{step.id}: its doc quotes none of the seed's steps"
        primaries.append(min(cited, key=lambda h: cited[h]))

    assert all(line in header for _, line in SEED_PLANS[name])
    assert sorted(primaries, key=headings.index) == primaries, "out of the seed's order"
    assert set(primaries) == set(headings), "a numbered step of the seed has no step"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_header_carries_the_prometheus_rule_of_every_alert_it_matches(path: Path) -> None:
    text = path.read_text(encoding="utf-8")

    for alertname in _load(path.stem).match.alerts:
        assert re.search(rf"^#.*- alert: {alertname}$", text, re.MULTILINE), alertname


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (fixture("xid79-firing.json")["alerts"][0]["labels"], "gpu-xid"),
        # Without a UUID the card cannot be told from a replacement: not the XID runbook.
        (
            {"alertname": "GPUXIDError", "Hostname": "gpu-node-02", "gpu": "5", "xid": "79"},
            "default",
        ),
        ({"alertname": "KubeNodeNotReady", "node": "gpu-node-03"}, "node-down"),
        ({"alertname": "BMCUnreachable", "node": "gpu-node-03"}, "node-down"),
        (
            {"alertname": "InfiniBandPortDown", "node": "gpu-node-01", "device": "mlx5_1"},
            "ib-partition",
        ),
        (
            {"alertname": "SharedFilesystemUnreachable", "storage": "nfs-01:/ckpt"},
            "storage-failure",
        ),
        ({"alertname": "GPUTemperatureHigh", "Hostname": "gpu-node-04", "gpu": "2"}, "overheating"),
        ({"alertname": "KubeletTooManyPods", "node": "gpu-node-01"}, "default"),
    ],
)
def test_alerts_open_the_runbook_written_for_them(labels: dict[str, str], expected: str) -> None:
    catalog = Catalog.of(load_paths([RUNBOOKS]))

    found = catalog.match(labels)

    assert found is not None and found.runbook.id == expected


# -- walking the branches ------------------------------------------------------------------------

FAILED = "failed"
SKIPPED = "skipped"  # a person skipped a manual step (or an approval they declined)
Outcome = Result | str | list[Result]
"""A step's result, FAILED or SKIPPED, or, for a step that `expect`s, its reads in turn."""


@dataclass
class Walk:
    """Which steps a walk ran (in order), the validated parameters of each action, the
    failed steps that escalated, and the one that stopped the runbook, if any."""

    ran: list[str] = field(default_factory=list)
    params: dict[str, Params] = field(default_factory=dict)
    escalated: list[str] = field(default_factory=list)
    stopped: str | None = None
    reads: dict[str, int] = field(default_factory=dict)
    """Reads each step that `expect`s took."""
    unexpected: list[str] = field(default_factory=list)
    """Steps whose reads never agreed with their `expect`."""
    each: dict[str, list[Params]] = field(default_factory=dict)
    """A `for_each: nodes` step's validated parameters, one per node in order."""


def node_incident(labels: dict[str, str]) -> dict[str, Any]:
    """What the engine shows of a node incident: the one node its alert names."""
    return {"scope": "node", "domain": None, "nodes": nodes_of(TopologySettings(), [labels])}


def domain_incident(level: str, value: str, nodes: list[str]) -> dict[str, Any]:
    """What the engine shows of a domain incident (contracts: incident.scope/domain)."""
    domain = {"level": level, "value": value, "name": f"{level}/{value}", "size": len(nodes)}
    return {"scope": "domain", "domain": domain, "nodes": nodes}


def walk(
    name: str,
    labels: dict[str, str],
    outcomes: dict[str, Outcome] | None = None,
    annotations: dict[str, str] | None = None,
    *,
    incident: dict[str, Any] | None = None,
    refusals: bool = False,
) -> Walk:
    """Go through a runbook as the engine does, in order: a step whose `when` is false is
    skipped; an action's `with` is rendered and validated by its parameter model; its
    result is `outcomes[step]` (gpu.classify_xid runs for real; other actions succeed with
    no fields, manual steps are marked done). Parameters the action's model refuses fail
    the test, or, with `refusals`, the step (as the engine fails it before it runs). A
    failure stops the walk on `on_failure:
    stop`, is recorded and passed on `escalate`, and passed on `continue`. A step that
    `expect`s takes the reads its outcome lists until one agrees or its `reads` are used
    up (more reads given than it takes fail the test). Conditions see each earlier step as
    the engine shows it (`engine.seen`) through the sandbox with StrictUndefined: a field
    no scenario gives fails. A FAILED action failed with `Failure.error` "refused";
    `failed(kind)` gives another kind."""
    runbook, outcomes = _load(name), outcomes or {}
    annotations = annotations or {}
    about = {"number": 7, "ref": "INC-7", "severity": "critical"}
    about.update(incident or node_incident(labels))
    facts = templates.render_facts(runbook.facts, labels, annotations)
    seen: dict[str, dict[str, Any]] = {}
    done = Walk()
    for step in runbook.steps:
        context = {
            "labels": labels,
            "annotations": annotations,
            "facts": facts,
            "steps": seen,
            "incident": about,
        }
        if step.when and not templates.evaluate(step.when, context):
            seen[step.id] = engine.seen(StepState.SKIPPED, None)
            continue
        outcome = outcomes.get(step.id)
        if step.action is not None:
            action = registry.get(step.action)
            raw = templates.render_params(step.with_, context) if not step.for_each else {}
            try:
                if step.for_each:
                    done.each[step.id] = [
                        action.parse(templates.render_params(step.with_, {**context, "node": n}))
                        for n in about["nodes"]
                    ]
                else:
                    done.params[step.id] = action.parse(raw)
            except ParamsInvalid:
                if not refusals:
                    raise
                outcome = FAILED
            if outcome is None and step.action == "gpu.classify_xid":
                ctx = ActionContext(actor="runbook-bot", settings=load_settings())
                outcome = execute(action, raw, ctx).result
        if outcome == SKIPPED:
            seen[step.id] = engine.seen(StepState.SKIPPED, None)
            continue
        done.ran.append(step.id)
        if step.expect is not None and isinstance(outcome, Result):
            outcome = [outcome]
        if isinstance(outcome, list):
            outcome = _read(step, outcome, context, done)
        if outcome == FAILED:
            outcome = failed("refused")
        if isinstance(outcome, str):
            seen[step.id] = engine.seen(StepState(outcome), None, f"{step.id} {outcome}")
        elif step.action is None:
            seen[step.id] = engine.seen(StepState.SUCCEEDED, {})
        else:
            result = outcome or Result(ok=True, summary="done")
            state = StepState.SUCCEEDED if result.ok else StepState.FAILED
            seen[step.id] = engine.seen(
                state,
                result.model_dump(mode="json"),
                result.summary,
                reads=done.reads.get(step.id, int(result.ok)),
                unexpected=step.id in done.unexpected,
            )
        if seen[step.id]["ok"] is False and step.on_failure == "stop":
            done.stopped = step.id
            break
        if seen[step.id]["ok"] is False and step.on_failure == "escalate":
            done.escalated.append(step.id)
    return done


def _read(step: Step, reads: list[Result], context: dict[str, Any], done: Walk) -> Result:
    """The read a step that `expect`s stands with, of `reads` taken in turn."""
    assert step.expect is not None, f"{step.id} does not expect: give it one result"
    for count, result in enumerate(reads, start=1):
        done.reads[step.id] = count
        seen = {**context, "result": result.model_dump(mode="json")}
        if not result.ok or templates.evaluate(step.expect.that, seen):
            assert count == len(reads), f"{step.id}: read {count} agreed; more were given"
            return result
        if count == step.expect.reads:
            assert count == len(reads), f"{step.id} takes {count} reads, {len(reads)} given"
            done.unexpected.append(step.id)
            return result
    pytest.fail(f"{step.id} wants another read after {len(reads)}")


def failed(kind: str) -> Failure:
    """An action's failure of `kind` (credentials, unavailable, refused, ...)."""
    return Failure(ok=False, summary=f"failed: {kind}", error=kind)


def history(
    node: str = "gpu-node-02",
    *,
    rma: bool = False,
    card_faults: int = 1,
    rules: tuple[str, ...] = (),
) -> FaultHistory:
    """gpu.fault_history's answer; `rma` adds the seed's card_drops rule to `rules`."""
    names = ("card_drops", *rules) if rma else rules
    repeats = [
        RepeatHit(rule=rule, source="", count=5, threshold=5, window="7d", consequence="")
        for rule in names
    ]
    return FaultHistory(
        ok=True, summary="", node=node, card_faults=card_faults, rma=rma, repeats=repeats
    )


def diag(level: int, *, passed: bool = True, node: str = "gpu-node-02") -> GpuDiag:
    return GpuDiag(ok=True, summary="", node=node, level=level, passed=passed)


def node_status(ready: str, node: str = "gpu-node-03") -> NodeStatus:
    return NodeStatus(ok=True, summary="", node=node, ready=ready, unschedulable=False)


def power(state: str, node: str = "gpu-node-03") -> PowerStatus:
    return PowerStatus(ok=True, summary="", node=node, bmc="redfish 10.0.8.13", power=state)


def ports(healthy: bool, node: str = "gpu-node-01") -> IbPortStatus:
    return IbPortStatus(ok=True, summary="", node=node, expected_rate=200, healthy=healthy)


def xid_alert(xid: str) -> dict[str, str]:
    labels: dict[str, str] = fixture("xid79-firing.json")["alerts"][0]["labels"]
    return {**labels, "xid": xid}


READS = ["classify", "history", "snapshot"]


def test_xid_79_cordons_drains_power_cycles_and_returns_the_node_after_level_3_diag() -> None:
    done = walk("gpu-xid", xid_alert("79"), {"history": history(), "diag": diag(3)})

    assert done.ran == [
        *READS,
        "cordon",
        "drain",
        "power_cycle",
        "wait_ready",
        "diag",
        "uncordon_after_power_cycle",
    ]
    assert done.params["diag"].model_dump()["level"] == 3
    assert done.params["cordon"].model_dump() == {
        "node": "gpu-node-02",
        "reason": "XID 79 on GPU 5 (fallen_off_bus)",
    }
    history_params = done.params["history"].model_dump()
    assert history_params["uuid"] == "GPU-66486582-0000-0000-0000-000000000005"
    assert history_params["gpu"] == 5


def test_a_second_drop_in_a_week_keeps_the_node_cordoned_with_an_rma_follow_up() -> None:
    done = walk("gpu-xid", xid_alert("79"), {"history": history(rma=True), "diag": diag(3)})

    assert "rma" in done.ran
    assert "cordon" in done.ran
    assert not {"uncordon", "uncordon_after_power_cycle", "vendor"} & set(done.ran)


def test_a_repeat_rule_short_of_rma_sends_the_node_to_the_vendor_before_any_recovery() -> None:
    outcomes = {"history": history(rules=("node_remediations",)), "diag": diag(2)}

    done = walk("gpu-xid", xid_alert("48"), outcomes)

    assert done.ran[3:6] == ["cordon", "drain", "vendor"]
    assert done.ran.index("vendor") < done.ran.index("reset")


@pytest.mark.parametrize("xid", ["13", "31"])
def test_an_application_xid_tells_the_job_owner_and_never_cordons(xid: str) -> None:
    done = walk("gpu-xid", xid_alert(xid), {"history": history(), "app_history": history()})

    assert done.ran == [*READS, "notify_owner", "app_history"]


def test_an_application_xid_twice_in_a_day_on_one_gpu_asks_for_diagnostics() -> None:
    outcomes = {"history": history(), "app_history": history(card_faults=2)}

    done = walk("gpu-xid", xid_alert("13"), outcomes)

    assert done.ran == [*READS, "notify_owner", "app_history", "app_repeat"]


def test_an_informational_xid_is_recorded_and_the_node_left_alone() -> None:
    done = walk("gpu-xid", xid_alert("63"), {"history": history()})

    assert done.ran == [*READS, "record_trend"]


def test_a_resettable_xid_resets_the_gpu_and_verifies_at_level_2() -> None:
    done = walk("gpu-xid", xid_alert("48"), {"history": history(), "diag": diag(2)})

    assert done.ran == [*READS, "cordon", "drain", "reset", "diag", "uncordon"]
    assert done.params["reset"].model_dump() == {"node": "gpu-node-02", "gpu": 5}
    assert done.params["diag"].model_dump()["level"] == 2


def test_a_reset_the_gpu_refuses_falls_back_to_a_power_cycle_and_level_3() -> None:
    outcomes = {"history": history(), "reset": FAILED, "diag": diag(3)}

    done = walk("gpu-xid", xid_alert("48"), outcomes)

    assert done.ran[-5:] == [
        "reset",
        "power_cycle",
        "wait_ready",
        "diag",
        "uncordon_after_power_cycle",
    ]
    assert done.params["diag"].model_dump()["level"] == 3


def test_an_unknown_xid_is_taken_out_and_sent_to_the_vendor_without_a_reset() -> None:
    done = walk("gpu-xid", xid_alert("999"), {"history": history(), "diag": diag(2)})

    assert done.ran == [*READS, "cordon", "drain", "vendor", "diag", "uncordon"]


def test_xid_45_alone_restarts_fabric_manager_by_hand() -> None:
    done = walk("gpu-xid", xid_alert("45"), {"history": history(), "diag": diag(2)})

    assert "restart_fabric_manager" in done.ran
    assert not {"reset", "power_cycle"} & set(done.ran)


def test_a_drain_that_fails_escalates_and_nothing_recovers_an_undrained_node() -> None:
    done = walk("gpu-xid", xid_alert("79"), {"history": history(), "drain": FAILED})

    assert done.ran == [*READS, "cordon", "drain"]
    assert done.escalated == ["drain"]


def test_a_power_cycle_that_fails_escalates_and_the_node_is_not_diagnosed() -> None:
    done = walk("gpu-xid", xid_alert("79"), {"history": history(), "power_cycle": FAILED})

    assert done.ran == [*READS, "cordon", "drain", "power_cycle"]
    assert done.escalated == ["power_cycle"]


def test_an_xid_the_parameter_model_refuses_stops_the_runbook_for_a_person() -> None:
    done = walk("gpu-xid", xid_alert("4000"), refusals=True)

    assert (done.ran, done.stopped) == (["classify"], "classify")


def test_failed_diagnostics_or_an_unknown_history_never_return_the_node() -> None:
    failed = walk("gpu-xid", xid_alert("48"), {"history": history(), "diag": diag(2, passed=False)})
    unknown = walk("gpu-xid", xid_alert("48"), {"history": FAILED, "diag": diag(2)})

    assert failed.ran[-2:] == ["diag", "diag_failed"]
    assert unknown.ran[-1] == "diag"


NODE_DOWN = {"alertname": "KubeNodeNotReady", "node": "gpu-node-03"}
NODE_READS = ["node_status", "power", "sel"]


def test_a_node_found_off_is_powered_on_diagnosed_burnt_in_and_returned_by_two() -> None:
    outcomes = {
        "node_status": node_status("Unknown"),
        "power": power("off"),
        "vendor": SKIPPED,
        "diag": diag(3, node="gpu-node-03"),
    }

    done = walk("node-down", NODE_DOWN, outcomes)

    assert done.ran == [
        *NODE_READS,
        "cordon",
        "pods",
        "out_of_service",
        "checkpoints",
        "remove_out_of_service",
        "power_on",
        "wait_ready",
        "drain",
        "diag",
        "burn_in",
        "uncordon",
    ]
    assert done.params["diag"].model_dump()["level"] == 3
    assert _load("node-down").steps[-1].approval == "two"


def test_a_hung_node_is_power_cycled_and_never_marked_out_of_service() -> None:
    outcomes = {"node_status": node_status("Unknown"), "power": power("on"), "burn_in": SKIPPED}

    done = walk("node-down", NODE_DOWN, {**outcomes, "diag": diag(3, node="gpu-node-03")})

    assert "power_cycle" in done.ran
    assert not {"out_of_service", "power_on", "uncordon"} & set(done.ran)


def test_a_bmc_alert_on_a_ready_node_asks_for_the_bmc_and_touches_nothing() -> None:
    labels = {"alertname": "BMCUnreachable", "node": "gpu-node-03"}
    silent = failed("unavailable")
    outcomes = {"node_status": node_status("True"), "power": silent, "sel": silent}

    done = walk("node-down", labels, outcomes)

    assert done.ran == [*NODE_READS, "bmc_unreachable"]


def test_a_bmc_alert_on_a_ready_node_whose_bmc_answers_says_so_and_touches_nothing() -> None:
    labels = {"alertname": "BMCUnreachable", "node": "gpu-node-03"}
    outcomes = {"node_status": node_status("True"), "power": power("on")}

    done = walk("node-down", labels, outcomes)

    assert done.ran == [*NODE_READS, "bmc_only"]
    assert done.reads == {"node_status": 1, "power": 1} and done.unexpected == []


def test_a_down_node_whose_bmc_is_silent_is_cordoned_then_waits_for_remote_hands() -> None:
    silent = failed("unavailable")
    outcomes = {"node_status": node_status("Unknown"), "power": silent, "sel": silent}

    done = walk("node-down", NODE_DOWN, {**outcomes, "wait_ready": FAILED})

    assert done.ran == [
        *NODE_READS,
        "cordon",
        "pods",
        "checkpoints",
        "bmc_unreachable",
        "wait_ready",
        "vendor",
    ]
    assert done.escalated == ["wait_ready"]


def test_a_wrong_bmc_password_holds_back_only_the_power_steps_until_it_is_fixed() -> None:
    refused = failed("credentials")
    outcomes = {
        "node_status": node_status("False"),
        "power": refused,
        "sel": refused,
        "power_again": [power("on")],
        "burn_in": SKIPPED,
    }

    done = walk("node-down", NODE_DOWN, {**outcomes, "diag": diag(3, node="gpu-node-03")})

    assert done.ran[:9] == [
        *NODE_READS,
        "cordon",
        "pods",
        "checkpoints",
        "bmc_credentials",
        "power_again",
        "power_cycle",
    ]
    assert "bmc_unreachable" not in done.ran


def test_bmc_credentials_nobody_fixes_leave_the_machine_to_remote_hands() -> None:
    refused = failed("credentials")
    outcomes = {
        "node_status": node_status("False"),
        "power": refused,
        "sel": refused,
        "bmc_credentials": SKIPPED,
        "wait_ready": FAILED,
    }

    done = walk("node-down", NODE_DOWN, outcomes)

    assert done.ran[3:] == [
        "cordon",
        "pods",
        "checkpoints",
        "bmc_unreachable",
        "wait_ready",
        "vendor",
    ]
    assert not {"power_again", "power_on", "power_cycle"} & set(done.ran)


def test_a_not_ready_node_that_reads_ready_is_read_again_and_worked_as_down_when_it_stays() -> None:
    outcomes = {
        "node_status": [node_status("True")] * 4,
        "power": [power("on")],
        "diag": diag(3, node="gpu-node-03"),
    }

    done = walk("node-down", NODE_DOWN, outcomes)

    assert done.reads["node_status"] == 4 and done.unexpected == ["node_status"]
    assert done.ran[:5] == [*NODE_READS, "cordon", "pods"]
    assert "power_cycle" in done.ran and "bmc_only" not in done.ran


def test_a_node_that_goes_not_ready_on_the_second_read_is_taken_from_that_read() -> None:
    outcomes = {
        "node_status": [node_status("True"), node_status("False")],
        "power": [power("powering off"), power("powering off"), power("off")],
        "diag": diag(3, node="gpu-node-03"),
    }

    done = walk("node-down", NODE_DOWN, outcomes)

    assert done.reads == {"node_status": 2, "power": 3} and done.unexpected == []
    assert {"cordon", "out_of_service", "power_on"} <= set(done.ran)
    assert not {"power_cycle", "bmc_unreachable"} & set(done.ran)


def test_a_power_state_that_never_settles_asks_for_remote_hands_not_a_power_action() -> None:
    outcomes = {
        "node_status": node_status("False"),
        "power": [power("powering off")] * 4,
        "wait_ready": FAILED,
    }

    done = walk("node-down", NODE_DOWN, outcomes)

    assert done.unexpected == ["power"]
    assert "bmc_unreachable" in done.ran
    assert not {"out_of_service", "power_on", "power_cycle"} & set(done.ran)


FEED_NODES = [f"gpu-node-{i:04d}" for i in range(1, 9)]
FEED = domain_incident("power", "pdu-a1", FEED_NODES)
FEED_BRANCH = [
    "feed_power",
    "feed_sel",
    "feed",
    "feed_cordon",
    "feed_pods",
    "feed_checkpoints",
    "feed_power_on",
    "feed_wait_ready",
    "feed_drain",
    "feed_diag",
    "feed_burn_in",
    "feed_uncordon",
]


def test_a_power_feeds_machines_are_read_checked_once_powered_on_in_batches_and_returned() -> None:
    done = walk("node-down", NODE_DOWN, incident=FEED)

    assert done.ran == FEED_BRANCH
    assert not done.params, "a feed's incident runs no single-node action"
    for step in ("feed_power", "feed_cordon", "feed_power_on", "feed_diag", "feed_uncordon"):
        assert [p.model_dump()["node"] for p in done.each[step]] == FEED_NODES, step
    assert done.each["feed_cordon"][0].model_dump()["reason"] == "power feed pdu-a1 down"
    assert done.each["feed_diag"][0].model_dump()["level"] == 3
    steps = {step.id: step for step in _load("node-down").steps}
    power_on = steps["feed_power_on"]
    assert (power_on.batch, power_on.max_parallel, power_on.pause is not None) == (4, 4, True)
    assert steps["feed_uncordon"].approval == "two"
    assert [s.id for s in steps.values() if s.manual and s.id.startswith("feed")] == [
        "feed",
        "feed_checkpoints",
        "feed_burn_in",
    ]


def test_a_feed_whose_machines_fail_to_come_back_escalates_and_never_returns_them() -> None:
    done = walk("node-down", NODE_DOWN, {"feed_wait_ready": FAILED}, incident=FEED)

    assert done.ran == FEED_BRANCH[: FEED_BRANCH.index("feed_wait_ready") + 1]
    assert done.escalated == ["feed_wait_ready"]


def test_a_feed_whose_power_on_is_declined_still_waits_for_machines_the_idc_brings_back() -> None:
    done = walk("node-down", NODE_DOWN, {"feed_power_on": SKIPPED}, incident=FEED)

    assert "feed_power_on" not in done.ran
    assert done.ran[done.ran.index("feed_checkpoints") + 1 :] == FEED_BRANCH[7:]


IB_DOWN = {"alertname": "InfiniBandPortDown", "node": "gpu-node-01", "device": "mlx5_1"}


def test_one_node_with_a_port_down_checks_its_cable_and_returns_after_the_bandwidth_test() -> None:
    done = walk("ib-partition", IB_DOWN, {"ports": ports(False), "verify_ports": ports(True)})

    assert done.ran == [
        "ports",
        "check_node",
        "cordon",
        "drain",
        "replace_cable",
        "error_counters",
        "verify_ports",
        "bandwidth",
        "uncordon",
    ]
    assert done.params["ports"].model_dump()["expected_rate"] == 200


LEAF_NODES = [f"gpu-node-{i:02d}" for i in range(1, 17)]
LEAF = domain_incident("leaf", "ib-leaf-07", LEAF_NODES)


def test_a_leafs_nodes_are_read_cordoned_drained_verified_and_returned_as_one_set() -> None:
    done = walk("ib-partition", IB_DOWN, incident=LEAF)

    assert done.ran == [
        "leaf_ports",
        "check_fabric",
        "leaf_cordon",
        "leaf_drain",
        "repair_leaf",
        "restart_opensm",
        "error_counters",
        "leaf_verify",
        "leaf_bandwidth",
        "leaf_uncordon",
    ]
    cordons = [p.model_dump() for p in done.each["leaf_cordon"]]
    assert [c["node"] for c in cordons] == LEAF_NODES
    assert cordons[0]["reason"] == "InfiniBand leaf ib-leaf-07 down"
    assert [p.model_dump()["node"] for p in done.each["leaf_drain"]] == LEAF_NODES
    steps = {step.id: step for step in _load("ib-partition").steps}
    assert (steps["leaf_cordon"].max_parallel, steps["leaf_drain"].max_parallel) == (8, 4)
    assert not done.params, "a leaf incident runs no single-node action"


def test_a_leaf_whose_ports_are_not_all_back_keeps_its_nodes_cordoned() -> None:
    done = walk("ib-partition", IB_DOWN, {"leaf_bandwidth": SKIPPED}, incident=LEAF)

    assert done.ran[-2:] == ["error_counters", "leaf_verify"]
    assert "leaf_uncordon" not in done.ran


def test_ports_still_down_after_the_repair_keep_the_node_out() -> None:
    done = walk("ib-partition", IB_DOWN, {"ports": ports(False), "verify_ports": ports(False)})

    assert done.ran[-2:] == ["verify_ports", "ports_still_bad"]


NFS_DOWN = {
    "alertname": "SharedFilesystemUnreachable",
    "storage": "10.0.8.50:/exports/ckpt",
    "storage_kind": "nfs",
    "node": "gpu-node-05",
}
NFS_NODES = [f"gpu-node-{i:03d}" for i in range(1, 201)]
NFS_DOMAIN = domain_incident("storage", "10.0.8.50:/exports/ckpt", NFS_NODES)


def test_an_nfs_outage_finds_its_users_closes_the_queue_and_reopens_it_once_verified() -> None:
    done = walk("storage-failure", NFS_DOWN, incident=NFS_DOMAIN)

    assert done.ran == [
        "impact_mounts",
        "checkpoint_writable",
        "close_queue",
        "nfs_server",
        "rw_test",
        "resume_check",
        "data_loss",
        "reopen_queue",
    ]
    assert done.params["impact_mounts"].model_dump()["storage"] == "10.0.8.50:/exports/ckpt"
    assert done.params["close_queue"].model_dump()["queue"] == "default"


def test_a_storage_whose_queue_cannot_close_cordons_its_nodes_as_one_set_and_returns_them() -> None:
    done = walk("storage-failure", NFS_DOWN, {"close_queue": FAILED}, incident=NFS_DOMAIN)

    assert done.ran[:4] == [
        "impact_mounts",
        "checkpoint_writable",
        "close_queue",
        "cordon_mounting",
    ]
    assert [p.model_dump()["node"] for p in done.each["cordon_mounting"]] == NFS_NODES
    assert done.ran[-1] == "uncordon_mounting"
    assert not {"pause_by_hand", "client_mount", "reopen_queue"} & set(done.ran)


def test_one_node_reporting_an_nfs_mount_checks_its_own_client_first() -> None:
    done = walk("storage-failure", NFS_DOWN)

    assert done.ran[:5] == [
        "impact_mounts",
        "checkpoint_writable",
        "close_queue",
        "client_mount",
        "nfs_server",
    ]
    assert "cordon_mounting" not in done.ran and not done.each


def test_juicefs_checks_the_metadata_engine_and_an_unclosable_queue_is_paused_by_hand() -> None:
    labels = {
        "alertname": "JuiceFSMetadataSlow",
        "storage": "JuiceFS:ckpt",
        "storage_kind": "juicefs",
        "storage_class": "juicefs-sc",
        "volcano_queue": "training",
    }

    done = walk("storage-failure", labels, {"close_queue": FAILED})

    assert done.ran[:5] == [
        "impact_class",
        "checkpoint_writable",
        "close_queue",
        "pause_by_hand",
        "juicefs",
    ]
    assert "reopen_queue" not in done.ran


def test_io_errors_without_a_storage_label_ask_a_person_to_find_the_mount() -> None:
    done = walk("storage-failure", {"alertname": "TrainingIOErrors"})

    assert done.ran[:4] == ["checkpoint_writable", "close_queue", "nfs_server", "juicefs"]


HOT = {"alertname": "GPUTemperatureHigh", "Hostname": "gpu-node-04", "gpu": "2", "row": "r7"}


def test_one_hot_machine_checks_its_fans_and_stays_in_service() -> None:
    done = walk("overheating", HOT)

    assert done.ran == [
        "temperatures",
        "gpus",
        "fans",
        "replace_fan",
        "temperatures_after",
        "gpus_after",
    ]


ROW_NODES = [f"gpu-node-{i:02d}" for i in range(1, 33)]
ROW = domain_incident("row", "b", ROW_NODES)


def test_a_hot_row_sheds_load_then_shuts_down_in_order_and_powers_on_in_batches() -> None:
    done = walk("overheating", HOT, incident=ROW)

    assert done.ran == [
        "row_temperatures",
        "facility",
        "row_cordon",
        "row_jobs",
        "stop_low_priority",
        "row_drain",
        "row_soft_off",
        "cooling_back",
        "row_power_on",
        "row_wait_ready",
        "row_temperatures_after",
        "watch_cooling",
        "row_uncordon",
    ]
    assert done.params["row_jobs"].model_dump()["nodes"] == ROW_NODES
    stops = [p.model_dump() for p in done.each["stop_low_priority"]]
    assert [(s["nodes"], s["below"]) for s in stops] == [([n], 1000) for n in ROW_NODES]
    assert stops[0]["reason"] == "row b overheating: shedding load"
    for step in ("row_cordon", "row_drain", "row_soft_off", "row_power_on", "row_uncordon"):
        assert [p.model_dump()["node"] for p in done.each[step]] == ROW_NODES, step
    steps = {step.id: step for step in _load("overheating").steps}
    assert (steps["row_drain"].max_parallel, steps["row_soft_off"].max_parallel) == (4, 4)
    power_on = steps["row_power_on"]
    assert (power_on.batch, power_on.pause) == (4, parse_duration("10m"))
    assert sum(s.action is None for s in _load("overheating").steps if s.id == "facility") == 1


def test_a_hot_row_that_cools_before_the_threshold_keeps_the_machines_running() -> None:
    done = walk("overheating", HOT, {"row_drain": SKIPPED}, incident=ROW)

    assert "stop_low_priority" in done.ran and "watch_cooling" in done.ran
    assert not {"row_soft_off", "row_power_on", "cooling_back"} & set(done.ran)
    assert done.ran[-1] == "row_uncordon"


def test_a_row_that_stays_hot_after_the_power_on_stays_cordoned() -> None:
    done = walk("overheating", HOT, {"watch_cooling": SKIPPED}, incident=ROW)

    assert done.ran[-1] == "row_temperatures_after"
    assert "row_uncordon" not in done.ran


def test_one_hot_machine_never_touches_the_row_steps() -> None:
    done = walk("overheating", HOT)

    assert not [step for step in done.ran if step.startswith("row_")]
    assert "facility" not in done.ran and not done.each


def test_the_fallback_snapshots_a_named_node_with_reads_and_pages_a_person() -> None:
    named = walk("default", {"alertname": "KubeletTooManyPods", "node": "gpu-node-01"})
    nameless = walk("default", {"alertname": "WatchdogMissing"})

    assert named.ran == ["acknowledge", "node_status", "power", "sel", "gpus", "escalate"]
    assert named.params["node_status"].model_dump() == {"node": "gpu-node-01"}
    assert nameless.ran == ["acknowledge", "escalate"]
