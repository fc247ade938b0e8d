"""The words of a draft's timeline rows, GPU history and skipped-steps sentence, in
Chinese and in English, from the facts `bot.postmortem.timeline` gathered.

Every word is the report's own; what people wrote (notes, dispositions, reasons), names,
node names and the error text a system returned are quoted as they were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from bot.postmortem.timeline import Moment, Skipped

Lang = Literal["zh", "en"]
FAULTS: dict[str, dict[str, str]] = {
    "zh": {
        "fallen_off_bus": "GPU 掉出总线",
        "drain_and_reset": "硬件故障，需迁移任务并重置 GPU",
        "reset_gpu": "需重置 GPU",
        "nvlink": "NVLink 故障",
        "fabric_manager": "Fabric Manager 故障",
        "application": "应用层错误",
        "informational": "提示性事件",
        "unknown": "未知 XID",
    },
    "en": {
        "fallen_off_bus": "fell off the bus",
        "drain_and_reset": "a hardware fault: drain and reset the GPU",
        "reset_gpu": "needs a GPU reset",
        "nvlink": "an NVLink fault",
        "fabric_manager": "a Fabric Manager fault",
        "application": "an application error",
        "informational": "informational",
        "unknown": "an unknown XID",
    },
}


def row(moment: Moment, lang: Lang) -> str:
    """What happened at `moment`, in `lang` (one line; the template escapes it)."""
    words = _ZH if lang == "zh" else _EN
    phrase = words.get(moment.kind)
    return phrase(moment.facts) if phrase else _fallback(moment, lang)


def skipped(steps: Skipped, lang: Lang) -> str:
    """One sentence for the steps that did not apply; empty when there were none."""
    if not steps:
        return ""
    titles = [t[lang] for t in steps.titles]
    if lang == "zh":
        return f"{len(titles)} 个步骤不适用于本次故障，未执行：{'、'.join(titles)}。"
    one = len(titles) == 1
    return (
        f"{len(titles)} step{'' if one else 's'} did not apply to this incident and "
        f"{'was' if one else 'were'} not run: {'; '.join(titles)}."
    )


def history(result: dict[str, Any], lang: Lang, window: str = "") -> str:
    """A `gpu.fault_history` result in words: faults on the node and the card in `window`
    (the step's parameter, `7d`), drops in a week, and whether the RMA rule holds."""
    node, card = str(result.get("node", "")), str(result.get("card", ""))
    faults = len(result.get("faults") or [])
    mine, drops = int(result.get("card_faults") or 0), int(result.get("drops") or 0)
    rules = [str(h.get("rule", "")) for h in result.get("repeats") or [] if isinstance(h, dict)]
    if lang == "zh":
        text = f"{node} {_window_zh(window)}内 XID 故障 {faults} 次"
        if card:
            text += f"；{card}：{mine} 次，一周内掉卡 {drops} 次"
        if result.get("rma"):
            text += "；一周掉卡 ≥2 次，走 RMA 换卡，节点保持 cordon 直到更换"
        elif rules:
            text += f"；命中重复规则：{'、'.join(rules)}"
        return text
    text = f"{faults} XID fault{'' if faults == 1 else 's'} on {node}{_window_en(window)}"
    if card:
        text += f"; {card}: {mine}, {drops} drop{'' if drops == 1 else 's'} in a week"
    if result.get("rma"):
        text += "; 2 or more drops in a week: RMA the card, the node stays cordoned"
    elif rules:
        text += f"; repeat rules that hold: {', '.join(rules)}"
    return text


def _window_zh(window: str) -> str:
    units = {"d": "天", "h": "小时", "m": "分钟"}
    if window[:-1].isdigit() and window[-1:] in units:
        return f"近 {window[:-1]} {units[window[-1]]}"
    return "近期" if not window else f"近 {window} "


def _window_en(window: str) -> str:
    units = {"d": "day", "h": "hour", "m": "minute"}
    if window[:-1].isdigit() and window[-1:] in units:
        n = int(window[:-1])
        return f" in the last {n} {units[window[-1]]}{'' if n == 1 else 's'}"
    return f" in {window}" if window else ""


# --- the rows, by entry type ------------------------------------------------------------


def _step(f: dict[str, Any], lang: Lang) -> str:
    title = f.get("titles", {}).get(lang) or f.get("step", "")
    if title == f.get("step"):
        return f"step {f.get('step', '')}" if lang == "en" else f"步骤 {f.get('step', '')}"
    return f"step {f['step']} ({title})" if lang == "en" else f"步骤 {f['step']}（{title}）"


def _said(f: dict[str, Any], key: str, lang: Lang) -> str:
    text = f.get(key)
    if not text:
        return ""
    return f"：{text}" if lang == "zh" else f": {text}"


def _where(f: dict[str, Any], lang: Lang) -> str:
    where = f.get("where") or {}
    if lang == "zh":
        parts = [where.get("node", "")]
        parts[0] += f" 第 {where['gpu']} 卡" if "gpu" in where else ""
        parts.append(f"XID {where['xid']}" if "xid" in where else "")
        shown = "，".join(p.strip() for p in parts if p.strip())
        return f"（{shown}）" if shown else ""
    parts = [where.get("node", "")]
    parts[0] += f" GPU {where['gpu']}" if "gpu" in where else ""
    parts.append(f"XID {where['xid']}" if "xid" in where else "")
    shown = ", ".join(p.strip() for p in parts if p.strip())
    return f" ({shown})" if shown else ""


def _result(f: dict[str, Any], lang: Lang) -> str:
    """An action's result in words; English falls back to the action's own summary."""
    result: dict[str, Any] = f.get("result") or {}
    action, node = f.get("action"), str(result.get("node", ""))
    zh = lang == "zh"
    if action == "gpu.classify_xid":
        codes = "/".join(str(c) for c in result.get("codes") or [])
        fault = FAULTS[lang].get(str(result.get("fault_class")), str(result.get("meaning", "")))
        return f"XID {codes}：{fault}" if zh else f"XID {codes}: {fault}"
    if action == "gpu.fault_history":
        return history(result, lang, str((f.get("params") or {}).get("window", "")))
    if action == "k8s.cordon":
        return f"{node} 已停止调度（cordon）" if zh else f"{node} cordoned"
    if action == "k8s.uncordon":
        return f"{node} 已恢复调度（uncordon）" if zh else f"{node} uncordoned"
    if action in ("k8s.drain", "k8s.drain_unsafe"):
        n = len(result.get("evicted") or [])
        return f"{node} 已驱逐 {n} 个 Pod" if zh else f"{node} drained, {n} pods evicted"
    if action == "bmc.power_cycle":
        return f"{node} 已通过 BMC 整机断电重启" if zh else f"{node} power-cycled through its BMC"
    if action == "gpu.reset":
        gpu = result.get("gpu", "")
        return f"{node} 第 {gpu} 卡已重置" if zh else f"{node} GPU {gpu} reset"
    if action == "gpu.diag":
        level, passed = result.get("level", ""), bool(result.get("passed"))
        if zh:
            return f"dcgmi diag -r {level} {'通过' if passed else '未通过'}"
        return f"dcgmi diag -r {level} {'passed' if passed else 'did not pass'}"
    if action == "k8s.wait_node_ready":
        return f"{node} 已恢复 Ready" if zh else f"{node} is Ready"
    if zh:
        return ""
    return str(result.get("summary", ""))


def _approved(f: dict[str, Any], lang: Lang) -> str:
    others = f.get("approvers", [])[:-1]
    if lang == "zh":
        return (f"与 {'、'.join(others)} 共同" if others else "") + f"批准{_step(f, lang)}"
    return f"approved {_step(f, lang)}" + (f" with {', '.join(others)}" if others else "")


def _succeeded(f: dict[str, Any], lang: Lang) -> str:
    if f.get("kind") == "manual":
        if lang == "zh":
            return f"完成{_step(f, lang)}{_said(f, 'note', lang)}"
        return f"did {_step(f, lang)}{_said(f, 'note', lang)}"
    done = _result(f, lang)
    if lang == "zh":
        return f"{_step(f, lang)}完成" + (f"：{done}" if done else "")
    return f"{_step(f, lang)} succeeded" + (f": {done}" if done else "")


def _not_drained(f: dict[str, Any], lang: Lang) -> str:
    """Why a drain did not finish, from its result: the pods it refused or left behind."""
    result: dict[str, Any] = f.get("result") or {}
    node = result.get("node", "")
    refused = [str(p.get("pod", "")) for p in result.get("refused") or [] if isinstance(p, dict)]
    left = [str(p.get("pod", "")) for p in result.get("remaining") or [] if isinstance(p, dict)]
    if refused:
        pods = ", ".join(refused)
        if lang == "zh":
            return f"{node} 未驱逐任何 Pod：{pods} 不能安全驱逐"
        return f"{node} not drained, nothing evicted: {pods} may not be evicted"
    if left:
        pods = ", ".join(left)
        if lang == "zh":
            return f"{node} 未驱逐完：仍有 {len(left)} 个 Pod 未迁出（{pods}）"
        return f"{node} not drained: {len(left)} still on it ({pods})"
    return ""


def _ended(verb_en: str, verb_zh: str) -> Callable[[dict[str, Any], Lang], str]:
    def word(f: dict[str, Any], lang: Lang) -> str:
        error = f.get("error")
        if f.get("action") in ("k8s.drain", "k8s.drain_unsafe"):
            why = _not_drained(f, lang)
            if why:
                return (
                    f"{_step(f, lang)}{verb_zh}：{why}"
                    if lang == "zh"
                    else (f"{_step(f, lang)} {verb_en}: {why}")
                )
        if lang == "zh":
            return f"{_step(f, lang)}{verb_zh}" + (f"，错误信息：「{error}」" if error else "")
        return f"{_step(f, lang)} {verb_en}" + (f": {error}" if error else "")

    return word


def _acknowledged(f: dict[str, Any], lang: Lang) -> str:
    """Acknowledged by hand, or by deciding (engine: `data.decision`, `data.step`)."""
    decision = {
        "zh": {"approve": "批准", "skip": "跳过", "done": "完成", "stop": "停止",
               "repropose": "重新提议", "own": "接手负责"},
        "en": {"approve": "approving", "skip": "skipping", "done": "marking done",
               "stop": "stopping the rest of", "repropose": "proposing again",
               "own": "taking ownership"},
    }[lang].get(f.get("decision", ""), "")  # fmt: skip
    what = f"{decision}{_step(f, lang)}" if lang == "zh" else f"{decision} {_step(f, lang)}"
    if not f.get("step"):
        what = decision
    if lang == "zh":
        return f"确认响应{f'（{what}即确认）' if what else ''}{_said(f, 'note', lang)}"
    return f"acknowledged{f' by {what}' if what else ''}{_said(f, 'note', lang)}"


def _paged(f: dict[str, Any], lang: Lang) -> str:
    """A page: the first level, a level up (still not acknowledged), or the reminder of an
    acknowledged incident that is not resolved in time (the ladder's `ack` timer)."""
    who, unreachable = f.get("paged") or [], f.get("unreachable") or []
    level = int(f.get("level") or 1)
    if lang == "zh":
        if f.get("ack_timeout"):
            why = "已确认但仍未解决"
        else:
            why = f"第 {level} 级" + ("，仍未确认" if level > 1 or f.get("again") else "")
        text = f"呼叫 {'、'.join(who) or '无人'}（{why}）"
        return text + (f"；无法联系：{'、'.join(unreachable)}" if unreachable else "")
    if f.get("ack_timeout"):
        why = "acknowledged but still not resolved"
    else:
        why = f"level {level}" + (", not acknowledged" if level > 1 or f.get("again") else "")
    text = f"paged {', '.join(who) or 'nobody'} ({why})"
    return text + (f"; not reachable: {', '.join(unreachable)}" if unreachable else "")


_EN: dict[str, Callable[[dict[str, Any]], str]] = {
    "alert.firing": lambda f: f"{f['alertname']} firing{_where(f, 'en')}",
    "alert.resolved": lambda f: f"{f['alertname']} resolved{_where(f, 'en')}",
    "incident.opened": lambda f: f"incident opened ({f['severity']})",
    "incident.acknowledged": lambda f: _acknowledged(f, "en"),
    "incident.owner": lambda f: (
        "took ownership" if f.get("took") else f"made {f.get('owner', '')} the owner"
    ),
    "incident.severity_raised": lambda f: f"severity raised to {f['to']}",
    "incident.alerts_cleared": lambda f: "all its alerts resolved",
    "incident.resolved": lambda f: (
        "resolved: its alerts resolved"
        if f.get("by_alerts")
        else f"resolved{_said(f, 'disposition', 'en')}"
    ),
    "incident.reopened": lambda f: f"reopened{_said(f, 'reason', 'en')}",
    "incident.closed": lambda f: "closed",
    "escalation.paged": lambda f: _paged(f, "en"),
    "escalation.silenced": lambda f: f"silenced paging until {f['until'][11:19]} UTC",
    "page.failed": lambda f: (
        f"page to {f.get('target', '?')} not delivered "
        f"after {f['attempts']} attempt{'' if f['attempts'] == 1 else 's'}"
    ),
    "step.approved": lambda f: _approved(f, "en"),
    "step.succeeded": lambda f: _succeeded(f, "en"),
    "step.failed": lambda f: _ended("failed", "")(f, "en"),
    "step.timed_out": lambda f: _ended("timed out", "")(f, "en"),
    "step.interrupted": lambda f: _ended("was interrupted", "")(f, "en"),
    "step.skipped": lambda f: (
        f"skipped {_step(f, 'en')}{_said(f, 'note', 'en')}"
        + (
            f" (later steps that read it: {', '.join(f['dependents'])})"
            if f.get("dependents")
            else ""
        )
    ),
    "step.reproposed": lambda f: f"proposed {_step(f, 'en')} again{_said(f, 'note', 'en')}",
    "step.stop_requested": lambda f: (
        f"stopped the rest of {_step(f, 'en')}{_said(f, 'note', 'en')}"
    ),
    "followup.added": lambda f: (
        f"added follow-up #{f.get('id')}: {f.get('title', '')}"
        + (f" (owner {f['owner']})" if f.get("owner") else "")
    ),
}
_ZH: dict[str, Callable[[dict[str, Any]], str]] = {
    "alert.firing": lambda f: f"告警 {f['alertname']} 触发{_where(f, 'zh')}",
    "alert.resolved": lambda f: f"告警 {f['alertname']} 恢复{_where(f, 'zh')}",
    "incident.opened": lambda f: f"建立故障事件（{f['severity']}）",
    "incident.acknowledged": lambda f: _acknowledged(f, "zh"),
    "incident.owner": lambda f: (
        "接手负责" if f.get("took") else f"指定 {f.get('owner', '')} 为负责人"
    ),
    "incident.severity_raised": lambda f: f"级别升为 {f['to']}",
    "incident.alerts_cleared": lambda f: "告警全部恢复",
    "incident.resolved": lambda f: (
        "告警全部恢复，事件自动结束"
        if f.get("by_alerts")
        else f"处置完成，事件结束{_said(f, 'disposition', 'zh')}"
    ),
    "incident.reopened": lambda f: f"重新打开事件{_said(f, 'reason', 'zh')}",
    "incident.closed": lambda f: "关闭事件",
    "escalation.paged": lambda f: _paged(f, "zh"),
    "escalation.silenced": lambda f: f"暂停呼叫至 {f['until'][11:19]} UTC",
    "page.failed": lambda f: f"呼叫 {f.get('target', '?')} 未送达（尝试 {f['attempts']} 次）",
    "step.approved": lambda f: _approved(f, "zh"),
    "step.succeeded": lambda f: _succeeded(f, "zh"),
    "step.failed": lambda f: _ended("", "失败")(f, "zh"),
    "step.timed_out": lambda f: _ended("", "超时")(f, "zh"),
    "step.interrupted": lambda f: _ended("", "被中断")(f, "zh"),
    "step.skipped": lambda f: (
        f"跳过{_step(f, 'zh')}{_said(f, 'note', 'zh')}"
        + (f"（依赖它的后续步骤：{'、'.join(f['dependents'])}）" if f.get("dependents") else "")
    ),
    "step.reproposed": lambda f: f"重新提议{_step(f, 'zh')}{_said(f, 'note', 'zh')}",
    "step.stop_requested": lambda f: f"停止{_step(f, 'zh')}的后续执行{_said(f, 'note', 'zh')}",
    "followup.added": lambda f: (
        f"新增跟进项 #{f.get('id')}：{f.get('title', '')}"
        + (f"（负责人 {f['owner']}）" if f.get("owner") else "")
    ),
}


def _fallback(moment: Moment, lang: Lang) -> str:
    """An entry type without a phrase yet: its kind and the log's summary, quoted."""
    if lang == "zh":
        return f"日志记录 {moment.kind}：「{moment.text}」"
    return moment.text
