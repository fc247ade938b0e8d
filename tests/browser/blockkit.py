"""Block Kit JSON as simple HTML that looks like a Slack message, for a browser to measure
and photograph (tests/browser/test_slack_card.py, docs/images/slack-card*.png).

Not Slack's renderer: enough of it to see a card as a phone shows it. The blocks the bot
sends (header, section with text or fields, context, actions with buttons, divider,
input), mrkdwn's `*bold*`, `_italic_`, `` `code` ``, ``` ```blocks``` ```, line breaks,
user mentions (`<@U0123>` as `@name`) and links (`<https://...|text>`). Text is escaped:
mrkdwn arrives with `&amp;`, `&lt;`, `&gt;` already (the bot's escaping), and anything
else that HTML would read as markup is escaped here.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

ANGLE = re.compile(r"<(@[UW][A-Z0-9]+|https?://[^\s<>|]+(?:\|[^<>]*)?|![a-z^A-Z0-9|]+)>")
BARE_AMP = re.compile(r"&(?!(?:amp|lt|gt);)")
CODE_BLOCK = re.compile(r"```(.+?)```", re.S)
CODE = re.compile(r"`([^`\n]+)`")
BOLD = re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])")
ITALIC = re.compile(r"(?<![\w_])_([^_\n]+)_(?![\w_])")

STYLE = """
body { margin: 0; background: #fff; color: #1d1c1d; font: 15px/1.46668 -apple-system,
  "Segoe UI", Lato, "Helvetica Neue", Arial, sans-serif; }
.message { display: grid; grid-template-columns: 36px 1fr; gap: 8px; padding: 8px 16px; }
.avatar { width: 36px; height: 36px; border-radius: 4px; background: #4a154b; color: #fff;
  font-weight: 700; display: flex; align-items: center; justify-content: center; }
.who { font-weight: 900; } .app { font-size: 10px; background: #e8e8e8; color: #616061;
  border-radius: 2px; padding: 0 3px; margin: 0 4px; } .time { color: #616061; font-size: 12px; }
.block { margin: 4px 0; overflow-wrap: anywhere; }
.header { font-size: 18px; font-weight: 900; line-height: 1.33; }
.context { color: #616061; font-size: 13px; display: flex; flex-wrap: wrap; gap: 4px 12px; }
.fields { display: grid; grid-template-columns: 1fr 1fr; gap: 4px 16px; }
.actions { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0; }
button { font: 700 15px/1 inherit; font-family: inherit; padding: 0 12px; height: 36px;
  border-radius: 4px; border: 1px solid #bbbabb; background: #fff; color: #1d1c1d; }
button.primary { background: #007a5a; border-color: #007a5a; color: #fff; }
button.danger { background: #fff; border-color: #bbbabb; color: #e01e5a; }
code { font: 12px Monaco, Menlo, Consolas, monospace; color: #e01e5a; background: #f8f8f8;
  border: 1px solid #e8e8e8; border-radius: 3px; padding: 1px 3px; }
pre { font: 12px/1.5 Monaco, Menlo, Consolas, monospace; background: #f8f8f8; margin: 4px 0;
  border: 1px solid #e8e8e8; border-radius: 4px; padding: 8px; white-space: pre-wrap; }
.mention { color: #1264a3; background: #e8f5fa; border-radius: 3px; padding: 0 2px; }
a { color: #1264a3; text-decoration: none; }
hr { border: 0; border-top: 1px solid #e8e8e8; }
label { font-weight: 700; display: block; } textarea { width: 100%; height: 60px; }
"""


def page(
    blocks: Sequence[Mapping[str, Any]],
    *,
    names: Mapping[str, str] | None = None,
    time: str = "03:42",
    title: str = "Slack card",
) -> str:
    """A whole HTML page showing one message from runbook-bot with these blocks; `names`
    maps Slack user ids to the names their mentions show."""
    body = "".join(block_html(block, names or {}) for block in blocks)
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f'<div class="message"><div class="avatar">rb</div><div>'
        f'<div><span class="who">runbook-bot</span><span class="app">APP</span>'
        f'<span class="time">{html.escape(time)}</span></div>{body}</div></div></body></html>'
    )


def block_html(block: Mapping[str, Any], names: Mapping[str, str]) -> str:
    kind = block["type"]
    attrs = f' data-block="{html.escape(kind)}"'
    if "block_id" in block:
        attrs += f' data-block-id="{html.escape(str(block["block_id"]))}"'
    if kind == "header":
        return f'<div class="block header"{attrs}>{text_html(block["text"], names)}</div>'
    if kind == "section":
        inner = text_html(block["text"], names) if "text" in block else ""
        if block.get("fields"):
            cells = "".join(f"<div>{text_html(f, names)}</div>" for f in block["fields"])
            inner += f'<div class="fields">{cells}</div>'
        return f'<div class="block section"{attrs}>{inner}</div>'
    if kind == "context":
        cells = "".join(f"<span>{text_html(e, names)}</span>" for e in block["elements"])
        return f'<div class="block context"{attrs}>{cells}</div>'
    if kind == "actions":
        return f'<div class="block actions"{attrs}>{"".join(map(button, block["elements"]))}</div>'
    if kind == "divider":
        return f"<hr{attrs}>"
    if kind == "input":
        label = text_html(block["label"], names)
        return f'<div class="block input"{attrs}><label>{label}</label><textarea></textarea></div>'
    raise ValueError(f"no HTML for a {kind!r} block: add it to tests/browser/blockkit.py")


def button(element: Mapping[str, Any]) -> str:
    style = element.get("style", "")
    action = html.escape(str(element.get("action_id", "")))
    label = html.escape(element["text"]["text"])
    kind = html.escape(style)
    return f'<button type="button" class="{kind}" data-action="{action}">{label}</button>'


def text_html(obj: Mapping[str, Any], names: Mapping[str, str]) -> str:
    if obj["type"] == "plain_text":
        return html.escape(obj["text"]).replace("\n", "<br>")
    return mrkdwn_html(obj["text"], names)


def mrkdwn_html(text: str, names: Mapping[str, str]) -> str:
    """Slack mrkdwn to HTML: the bot's own mentions and links, then the text styles."""
    pieces = ANGLE.split(text)
    out: list[str] = []
    for index, piece in enumerate(pieces):
        if index % 2:
            out.append(_angle(piece, names))
        else:
            out.append(
                _styled(BARE_AMP.sub("&amp;", piece).replace("<", "&lt;").replace(">", "&gt;"))
            )
    return "".join(out).replace("\n", "<br>").replace("</pre><br>", "</pre>")


def _angle(inside: str, names: Mapping[str, str]) -> str:
    if inside.startswith("@"):
        user = inside[1:]
        return f'<span class="mention">@{html.escape(names.get(user, user))}</span>'
    if inside.startswith("!"):
        return f'<span class="mention">@{html.escape(inside[1:].split("|")[0])}</span>'
    url, _, label = inside.partition("|")
    return f'<a href="{html.escape(url)}">{html.escape(label or url)}</a>'


def _styled(text: str) -> str:
    blocks: list[str] = []

    def keep(match: re.Match[str]) -> str:
        blocks.append(f"<pre>{match.group(1).strip(chr(10))}</pre>")
        return f"\x00{len(blocks) - 1}\x00"

    text = CODE_BLOCK.sub(keep, text)
    text = CODE.sub(r"<code>\1</code>", text)
    text = BOLD.sub(r"<b>\1</b>", text)
    text = ITALIC.sub(r"<i>\1</i>", text)
    return re.sub("\x00([0-9]+)\x00", lambda m: blocks[int(m.group(1))], text)
