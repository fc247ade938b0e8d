"""Where each setting came from, and settings errors said in those terms.

Settings are read from the environment (`RUNBOOK_BOT_*`), a YAML file, and defaults
(`bot.config`). `Sources` reads the first two as written, the file's keys with their
lines, so that an error names the environment variable or the file:line to change
(`describe`), with "did you mean" for a misspelt key at any depth, and `runbook-bot
config` can say where each effective value came from (`Sources.origin`).

`is_secret` and `masked` decide what is never shown: tokens, passwords, keys, signing
secrets and password hashes, and the password, query and (for paging targets) path of a
URL.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource
from yaml.nodes import MappingNode, Node, SequenceNode

from bot import yaml_errors
from bot.errors import ConfigInvalid

ENV_PREFIX = "RUNBOOK_BOT_"
CONFIG_ENV = "RUNBOOK_BOT_CONFIG"
MASK = "********"
"""What a secret shows as: the same for every secret, so not even its length leaks."""

Loc = tuple[str | int, ...]
_SECRET_ENDINGS = ("token", "secret", "password", "password_hash", "key")
_NAMING_ENDINGS = ("_file", "_env")
"""`password_file`, `routing_key_env`: where a secret is, not the secret."""


def is_secret(name: str | int) -> bool:
    """Whether a setting named `name` holds a secret (`webhook_token`, `password_hash`)."""
    text = str(name).lower()
    return text.endswith(_SECRET_ENDINGS) and not text.endswith(_NAMING_ENDINGS)


def masked(loc: Loc, value: Any) -> Any:
    """`value` as it may be shown: MASK for a secret that is set, a URL without its
    password and query (and, for a paging target, its path, which may carry a key)."""
    if value is None:
        return None
    names = [part for part in loc if isinstance(part, str)]
    if names and is_secret(names[-1]):
        return MASK
    if isinstance(value, str) and "://" in value:
        return _masked_url(value, path="targets" in loc)
    return value


def _masked_url(url: str, *, path: bool) -> str:
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return MASK
    hide_path = path and parts.path not in ("", "/")
    if password is None and not parts.query and not parts.fragment and not hide_path:
        return url  # nothing to hide: as written
    netloc = parts.netloc
    if password is not None:
        user = netloc.rsplit("@", 1)[0].split(":", 1)[0]
        netloc = f"{user}:{MASK}@{netloc.rsplit('@', 1)[1]}"
    shown_path = f"/{MASK}" if hide_path else parts.path
    query = f"?{MASK}" if parts.query else ""
    # By hand: urlunsplit drops the // of a URL with no host (sqlite:///PATH).
    return f"{parts.scheme}://{netloc}{shown_path}{query}"


@dataclass(frozen=True)
class Origin:
    """Where one value came from: `default`, `file` (`where`: FILE:LINE), `env` (`where`:
    the variable), or `argument` (given by the command, as `demo` does)."""

    kind: Literal["default", "file", "env", "argument"]
    where: str | None = None

    def __str__(self) -> str:
        return self.kind if self.where is None else f"{self.kind} {self.where}"

    def said(self) -> str:
        """For an error message: "set by RUNBOOK_BOT_X", "set in bot.yaml:3"."""
        if self.kind == "env":
            return f"set by {self.where}"
        if self.kind == "file":
            return f"set in {self.where}"
        return "the default" if self.kind == "default" else "given by the command"


@dataclass
class Sources:
    """The settings as written: the YAML file (values and the line of each key), the
    `RUNBOOK_BOT_*` variables that are set (JSON decoded for structured settings), and
    the names a command passed itself."""

    file: Path | None = None
    values: dict[str, Any] = field(default_factory=dict)
    lines: dict[Loc, int] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    """Setting -> the environment variable that sets it."""
    environment: dict[str, Any] = field(default_factory=dict)
    """Setting -> its value from the environment (decoded)."""
    arguments: frozenset[str] = frozenset()

    @classmethod
    def read(
        cls,
        settings: type[BaseSettings],
        config_file: str | Path | None = None,
        arguments: Sequence[str] = (),
    ) -> Sources:
        """Read the file (`config_file`, else $RUNBOOK_BOT_CONFIG) and the environment;
        ConfigInvalid names the file:line:column of a YAML mistake, or every variable that
        is not the JSON its setting takes."""
        path = config_file or os.environ.get(CONFIG_ENV)
        sources = cls(Path(path) if path else None, arguments=frozenset(arguments))
        if sources.file is not None:
            sources.values, sources.lines = _read_yaml(sources.file)
        sources._read_environment(settings)
        return sources

    def _read_environment(self, settings: type[BaseSettings]) -> None:
        reader = EnvSettingsSource(settings)
        given = {name.lower(): name for name in os.environ}
        problems = []
        for name, info in settings.model_fields.items():
            key = f"{ENV_PREFIX}{name}".lower()
            raw = reader.env_vars.get(key)
            if raw is None:
                continue
            variable = given.get(key, f"{ENV_PREFIX}{name.upper()}")
            self.variables[name] = variable
            if not reader.field_is_complex(info):
                self.environment[name] = raw
                continue
            try:
                self.environment[name] = json.loads(raw)
            except json.JSONDecodeError as exc:
                problems.append(
                    f"  {variable}: not valid JSON ({exc.msg}, at character {exc.pos + 1}): "
                    f"{name} takes a JSON {_json_kind(info.annotation)}; quote it for the "
                    f"shell ({variable}='{_example(info.annotation)}'), or set `{name}` in "
                    "the YAML settings file (--config) instead"
                )
        if problems:
            raise ConfigInvalid("\n".join(["invalid settings:", *problems]))

    def origin(self, loc: Loc) -> Origin:
        """Where the value at `loc` (`("console", "users", "alice", "roles")`) came from."""
        name = str(loc[0]) if loc else ""
        if name in self.environment and _holds(self.environment[name], loc[1:]):
            return Origin("env", self.variables[name])
        if name in self.arguments:
            return Origin("argument")
        if _holds(self.values, loc):
            return Origin("file", f"{self.file}:{self.line(loc)}")
        return Origin("default")

    def line(self, loc: Loc) -> int:
        """The line of the key at `loc`, or of the nearest key around it that was written."""
        loc = _written(self.values, loc)
        while loc and loc not in self.lines:
            loc = loc[:-1]
        return self.lines.get(loc, 1)


def _json_kind(annotation: Any) -> str:
    core = _unwrapped(annotation)
    return "list" if get_origin(core) is list else "object"


def _example(annotation: Any) -> str:
    return '["..."]' if _json_kind(annotation) == "list" else '{"name": ...}'


def _holds(data: Any, loc: Loc) -> bool:
    """Whether `data` has a value at `loc` (pydantic's location, which names the member
    of a tagged union, e.g. `pagerduty`, where the data has `kind: pagerduty`)."""
    for part in loc:
        if isinstance(data, Mapping):
            if part in data:
                data = data[part]
            elif data.get("kind") != part:
                return False
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return False
    return True


def _written(data: Any, loc: Loc) -> Loc:
    """`loc` without the union members pydantic adds, as the file's keys are."""
    kept: list[str | int] = []
    for part in loc:
        if isinstance(data, Mapping) and part not in data and data.get("kind") == part:
            continue
        kept.append(part)
        if isinstance(data, Mapping):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            data = None
    return tuple(kept)


def _read_yaml(path: Path) -> tuple[dict[str, Any], dict[Loc, int]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigInvalid(
            f"cannot read config file {path}: {exc.strerror}; check --config or ${CONFIG_ENV}"
        ) from exc
    except UnicodeDecodeError:
        raise ConfigInvalid(f"{path}: not UTF-8 text; save the file as UTF-8") from None
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        said = yaml_errors.explain(exc, text)
        raise ConfigInvalid(
            f"{path}:{said.line}:{said.column}: not valid YAML: {said.message}"
        ) from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigInvalid(f"{path}: the config file must be a mapping of setting: value")
    lines: dict[Loc, int] = {}
    _index(root, (), lines)
    for key in data:
        if not isinstance(key, str):
            line = lines.get((key,), 1)
            raise ConfigInvalid(
                f"{path}:{line}: {key!r} is not a setting name; names are text, like listen_port"
            )
    return data, lines


def _index(node: Node | None, loc: Loc, lines: dict[Loc, int]) -> None:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            here = (*loc, _scalar(key.value))
            lines[here] = key.start_mark.line + 1
            _index(value, here, lines)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*loc, index)] = item.start_mark.line + 1
            _index(item, (*loc, index), lines)


def _scalar(value: Any) -> str | int:
    """A key as `safe_load` types it, for the plain ones locations use (text, numbers)."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value if isinstance(value, str) else str(value)


# --- errors --------------------------------------------------------------------------------


def describe(exc: ValidationError, sources: Sources, model: type[BaseModel]) -> str:
    """Every error of `exc`, one line each, in the file's order: the setting, what is
    wrong with it (and what to do, or the key meant), and where it was set."""
    errors = exc.errors()
    found: list[tuple[Loc, str]] = []
    meant = set()  # a misspelt key's error says it; "required" for the key it meant would not
    for error in errors:
        if error["type"] == "extra_forbidden":
            loc = tuple(error["loc"])
            said, close = _unknown(loc, sources, model)
            found.append((loc, said))
            if close is not None:
                meant.add((*loc[:-1], close))
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] == "extra_forbidden" or (error["type"] == "missing" and loc in meant):
            continue
        found.append((loc, _invalid(error, loc, sources, model)))
    in_file = {loc: sources.line(loc) for loc, _ in found if _holds(sources.values, loc[:1])}
    found.sort(key=lambda item: in_file.get(item[0], 0))  # stable: the rest keep their order
    return "\n".join(["invalid settings:", *(f"  {said}" for _, said in found)])


def _invalid(error: Any, loc: Loc, sources: Sources, model: type[BaseModel]) -> str:
    name = _dotted(_written(sources.values, loc)) or "settings"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        message = f"required: set `{name}`"
        origin = sources.origin(loc[:-1]) if loc[:-1] else None
    else:
        message += _got(loc, error.get("input"), message)
        origin = sources.origin(loc) if loc else None
    said = f" ({origin.said()})" if origin is not None and origin.kind != "default" else ""
    if not loc:
        said = _mentioned(message, sources, model)
    return f"{name}: {message}{said}"


def _mentioned(message: str, sources: Sources, model: type[BaseModel]) -> str:
    """Where the settings a settings-wide error names were set: ` (a set by X; b set in F:3)`."""
    said = []
    for name in model.model_fields:
        origin = sources.origin((name,))
        if origin.kind != "default" and re.search(rf"\b{name}\b", message):
            said.append(f"{name} {origin.said()}")
    return f" ({'; '.join(said)})" if said else ""


def _got(loc: Loc, value: Any, message: str) -> str:
    """`, not 'abc'` for a plain value that is not a secret."""
    if any(is_secret(part) for part in loc):
        return ""
    if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 80):
        shown = repr(value)
        return "" if shown in message else f", not {shown}"
    return ""


def _unknown(loc: Loc, sources: Sources, model: type[BaseModel]) -> tuple[str, str | None]:
    """What to say of a key no setting has, and the key it probably meant."""
    written = _written(sources.values, loc)
    origin = sources.origin(loc)
    where = origin.where if origin.kind in ("file", "env") else "the settings"
    if origin.kind == "env":
        where = f"environment variable {origin.where}"
    text = f"unknown setting {_dotted(written)!r} in {where}"
    known = _fields_at(model, loc[:-1])
    if known is None:
        return text, None
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"{text}: did you mean {_dotted((*written[:-1], close[0]))!r}?", close[0]
    if len(loc) == 1:
        return f"{text}: `runbook-bot config --reference` lists every setting", None
    return f"{text}: {_dotted(written[:-1])} takes {', '.join(known)}", None


def _dotted(loc: Loc) -> str:
    return ".".join(str(part) for part in loc)


def _fields_at(model: type[BaseModel], loc: Loc) -> list[str] | None:
    """The keys the model at `loc` takes (the mapping a misspelt key was found in)."""
    annotation: Any = model
    for part in loc:
        annotation = _unwrapped(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(str(part))
            if info is None:
                return None
            annotation = info.annotation
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        elif get_origin(annotation) is list:
            annotation = get_args(annotation)[0]
        elif _is_union(annotation):
            annotation = _member(annotation, part)
            if annotation is None:
                return None
        else:
            return None
    annotation = _unwrapped(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [info.alias or name for name, info in annotation.model_fields.items()]
    return None


def _unwrapped(annotation: Any) -> Any:
    """`Annotated[X, ...]` -> X; `X | None` -> X."""
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
            continue
        if _is_union(annotation):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _member(union: Any, tag: str | int) -> Any:
    """The member of a tagged union whose `kind` is `tag`."""
    for member in get_args(union):
        member = _unwrapped(member)
        if isinstance(member, type) and issubclass(member, BaseModel):
            kind = member.model_fields.get("kind")
            if kind is not None and tag in get_args(kind.annotation):
                return member
    return None
