"""`GET /api/incidents/{n}/postmortem`: the draft as Markdown over the real app."""

from __future__ import annotations

import httpx

from tests.support.payloads import fixture


def test_the_api_serves_the_draft_as_markdown(client: httpx.Client) -> None:
    assert client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json")).is_success
    answer = client.get("/api/incidents/INC-1/postmortem", params={"format": "md"})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/markdown; charset=utf-8"
    assert 'filename="INC-1-postmortem.en.md"' in answer.headers["content-disposition"]
    assert answer.text.startswith("# Postmortem: INC-1 ")
    assert "XID 79 (fell off the bus)" in answer.text
    zh = client.get("/api/incidents/1/postmortem", params={"lang": "zh"})
    assert zh.text.startswith("# 故障复盘报告：INC-1 ")
    assert "（GPU 掉出总线）" in zh.text


def test_bad_requests_say_what_to_send(client: httpx.Client) -> None:
    assert client.get("/api/incidents/INC-9/postmortem").status_code == 404
    client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json"))
    answer = client.get("/api/incidents/1/postmortem", params={"format": "pdf"})
    assert answer.status_code == 400 and "format must be md" in answer.json()["error"]
    answer = client.get("/api/incidents/1/postmortem", params={"lang": "fr"})
    assert answer.status_code == 400 and "lang must be zh or en" in answer.json()["error"]
