"""Settings: environment `RUNBOOK_BOT_*` over an optional YAML file over defaults.

`load_settings()` is the one way in. Invalid settings raise `ConfigInvalid` naming each
setting, what is wrong and where it was set (the environment variable, or the file and
line: `bot.config_sources`); the CLI turns that into a message and exit code 2 before
anything starts. The defaults give a
working embedded setup: SQLite in the current directory, runbooks from `./runbooks`,
listening on 127.0.0.1:8080.
"""

from __future__ import annotations

from datetime import time, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyNetwork,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from bot.config_sources import CONFIG_ENV, ENV_PREFIX, Sources, describe
from bot.console_settings import ConsoleSettings
from bot.durations import Duration, format_duration
from bot.errors import ConfigInvalid
from bot.escalation_settings import Day, EscalationSettings
from bot.people_settings import PersonSettings, check_people
from bot.topology_settings import TopologySettings

__all__ = [
    "CONFIG_ENV",
    "ENV_PREFIX",
    "BmcCredentialsProfile",
    "BmcNode",
    "BmcSettings",
    "PersonSettings",
    "Role",
    "Settings",
    "Sources",
    "load_settings",
    "reference_markdown",
    "settings_from",
]

Role = Literal["responder", "second_line", "admin"]
"""What a person may do: every role may approve steps; escalation pages `second_line`."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BmcCredentialsProfile(_Strict):
    """A BMC login. The password is read when needed from a file or an environment
    variable (a mounted Secret); it is never written in the settings themselves."""

    username: str = Field(min_length=1, max_length=64)
    password_file: Path | None = None
    password_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    allow_annotations: bool = False
    """Whether a node's `runbook-bot/bmc-*` annotations may send this login to the address
    they name (inside `bmc.allowed_networks`); off: only `bmc.nodes` entries use it."""

    @model_validator(mode="after")
    def _one_source(self) -> BmcCredentialsProfile:
        if (self.password_file is None) == (self.password_env is None):
            raise ValueError("set exactly one of password_file and password_env")
        return self


class BmcNode(_Strict):
    """Where one node's BMC answers."""

    protocol: Literal["ipmi", "redfish"]
    address: str = Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:\[\]-]+$")
    port: int | None = Field(None, ge=1, le=65535)
    credentials: str = "default"
    system: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]{1,64}$")
    scheme: Literal["https", "http"] = "https"
    """Redfish only; `http` is for simulators and labs, never production BMCs."""
    cipher_suite: int | None = Field(None, ge=0, le=17)
    """IPMI only: the RMCP+ cipher suite (`ipmitool -C`, e.g. 17 or 3); unset: negotiated."""
    verify_tls: bool = True
    ca_file: Path | None = None


class BmcSettings(_Strict):
    """The BMC inventory and how patiently to talk to BMCs."""

    credentials: dict[str, BmcCredentialsProfile] = {}
    nodes: dict[str, BmcNode] = {}
    annotations: bool = False
    """Nodes not listed here may name their BMC in `runbook-bot/bmc-*` annotations. Off by
    default: a kubelet may annotate its own Node, so an annotation is an untrusted address."""
    allowed_networks: list[IPvAnyNetwork] = []
    """Where an annotated BMC address may be (CIDRs); an IP literal is required there."""
    timeout: Duration = timedelta(seconds=10)
    """One call to a BMC (an ipmitool run, an HTTP request)."""
    power_timeout: Duration = timedelta(minutes=5)
    """How long a power action waits for the BMC to report the new state."""
    attempts: int = Field(3, ge=1, le=10)
    """Tries of one read or one idempotent request when the BMC does not answer."""

    @model_validator(mode="after")
    def _annotations_fenced(self) -> BmcSettings:
        if self.annotations and not self.allowed_networks:
            raise ValueError(
                "annotations: true needs allowed_networks: list the networks your BMCs are "
                "in (CIDRs, e.g. [10.0.8.0/24]); an annotated address outside them is refused"
            )
        return self

    @model_validator(mode="after")
    def _profiles_exist(self) -> BmcSettings:
        for node, entry in self.nodes.items():
            if entry.credentials not in self.credentials:
                raise ValueError(
                    f"nodes.{node}.credentials: no credentials profile {entry.credentials!r}; "
                    f"define it under bmc.credentials"
                )
        return self


class Settings(BaseSettings):
    """Every setting of runbook-bot. Field descriptions feed `docs/configuration.md`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", validate_default=True, frozen=True
    )

    database_url: str = Field(
        "sqlite:///./runbook-bot.db",
        description=(
            "SQLAlchemy URL of the database. SQLite (the embedded default, one worker) or "
            "PostgreSQL for production: `postgresql+psycopg://user@host:5432/runbook_bot`."
        ),
    )
    database_connect_timeout: Duration = Field(
        timedelta(seconds=5),
        description="How long to wait for a database connection before answering 503.",
    )
    database_lock_timeout: Duration = Field(
        timedelta(seconds=3),
        ge=timedelta(milliseconds=100),
        description="PostgreSQL: how long a statement of a request (webhook, Slack, console, "
        "API, CLI) waits for a lock another session holds (`lock_timeout`) before the "
        "request answers 503 with Retry-After.",
    )
    database_statement_timeout: Duration = Field(
        timedelta(seconds=5),
        ge=timedelta(milliseconds=100),
        description="PostgreSQL: the longest one statement of a request may run "
        "(`statement_timeout`) before the request answers 503.",
    )
    database_worker_lock_timeout: Duration = Field(
        timedelta(seconds=30),
        ge=timedelta(milliseconds=100),
        description="PostgreSQL: `lock_timeout` of the worker's sessions; longer than a "
        "request's, since nobody waits on the worker's answer and it serialises on locks "
        "(the breaker's) held across Kubernetes calls.",
    )
    database_worker_statement_timeout: Duration = Field(
        timedelta(seconds=60),
        ge=timedelta(milliseconds=100),
        description="PostgreSQL: `statement_timeout` of the worker's sessions (sweeps and "
        "expiry over many rows take longer than a request's statements).",
    )
    database_migration_url: str | None = Field(
        None,
        description="SQLAlchemy URL `runbook-bot db upgrade` connects with: the role that owns "
        "the tables. Set, the upgrade then grants the runtime role (the user of "
        "`database_url`) only what the bot needs: INSERT and SELECT on `incident_log` and "
        "`runbook_versions`. Unset: `database_url` migrates (one role owns and runs; see "
        "docs/security.md).",
    )
    sqlite_synchronous: Literal["full", "normal"] = Field(
        "full",
        description="SQLite's `synchronous` pragma (WAL mode): `full` syncs every commit, so "
        "an alert answered 200 survives a power loss; `normal` is faster and may lose the "
        "last commits (docs/performance.md).",
    )
    log_key_file: Path | None = Field(
        None,
        description="File holding the incident log's key (a mounted Secret; at least 32 "
        "bytes, e.g. `openssl rand -hex 32`). Set, each log entry's hash is an HMAC-SHA256 "
        "under it and `log verify` detects edits, deletions and forged entries by anyone "
        "with only database access. Keep the same key for the life of the log.",
    )
    runbooks_dir: Path = Field(Path("./runbooks"), description="Directory of runbook YAML files.")
    listen_host: str = Field("127.0.0.1", description="Address `serve` binds to.")
    listen_port: int = Field(8080, ge=1, le=65535, description="Port `serve` listens on.")
    webhook_token: SecretStr | None = Field(
        None,
        description=(
            "Bearer token Alertmanager must send (`http_config.authorization`). "
            "Unset with no basic auth: the webhook accepts unauthenticated posts."
        ),
    )
    webhook_token_file: Path | None = Field(
        None,
        description="File holding the bearer token (a mounted Secret); exclusive with "
        "`webhook_token`.",
    )
    webhook_username: str | None = Field(
        None, description="Basic-auth user Alertmanager must send (`http_config.basic_auth`)."
    )
    webhook_password: SecretStr | None = Field(
        None, description="Basic-auth password; required with `webhook_username`."
    )
    max_body_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest webhook body accepted; larger posts get 413.",
    )
    reopen_window: Duration = Field(
        timedelta(hours=24),
        description="A resolved incident whose alert fires again within this window reopens; "
        "later firings open a new incident.",
    )
    log_level: str = Field("info", description="Logging level: debug, info, warning, error.")
    kubeconfig: Path | None = Field(
        None,
        description="Kubeconfig file for the cluster; unset: $KUBECONFIG or ~/.kube/config.",
    )
    kube_context: str | None = Field(None, description="Kubeconfig context; unset: current.")
    kube_in_cluster: bool = Field(
        False, description="Use the pod's service account (when running in the cluster)."
    )
    kube_timeout: Duration = Field(
        timedelta(seconds=15), description="Timeout of one Kubernetes API call."
    )
    drain_timeout: Duration = Field(
        timedelta(minutes=10),
        description="How long a drain waits for pods to leave before it gives up and lists "
        "the ones that remain.",
    )
    breaker_max_fraction: float = Field(
        0.10,
        gt=0,
        le=1,
        description="Circuit breaker: the bot never has more than this share of GPU nodes "
        "cordoned by itself (at least one node).",
    )
    breaker_max_nodes: int = Field(
        3, ge=1, description="Circuit breaker: and never more than this many nodes."
    )
    breaker_global_max_fraction: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Circuit breaker, global cap: a step over many nodes whose approval "
        "named its count may take that many nodes out of service, while the bot holds no "
        "more than this share of GPU nodes in all (at least one node); past it, an admin "
        "override names the count.",
    )
    breaker_global_max_nodes: int = Field(
        64, ge=1, description="Circuit breaker, global cap: and never more than this many nodes."
    )
    topology: TopologySettings = Field(
        default_factory=TopologySettings,
        description="Failure domains: `levels` (widest first, each a `name` and the node "
        "`label` that holds it, e.g. `{name: row, label: topology.example.com/row}`), "
        "`node_labels` and `storage_labels` (the alert labels that name the node and the "
        "storage), `max_staleness` (how old the cached node labels may be when their watch "
        "is broken). Empty levels: every node is its own domain. See docs/topology.md.",
    )
    causes: list[str] = Field(
        default_factory=lambda: ["node-down", "ib-partition", "storage-failure", "overheating"],
        max_length=64,
        description="Runbook ids, the most likely cause first: when nodes of one domain "
        "raise alerts of several runbooks within the correlation window, the domain's "
        "incident follows the first of them and the others' alerts join it as symptoms "
        "(a rack that lost power: its nodes NotReady, their fabric ports down).",
    )
    gpu_node_selector: str = Field(
        "nvidia.com/gpu.present=true",
        description="Label selector of the GPU nodes the circuit breaker counts.",
    )
    node_job_image: str = Field(
        "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        description="Image of the Jobs that run diagnostics on a node (k8s.node_job).",
    )
    node_job_namespace: str = Field(
        "runbook-bot", description="Namespace where node Jobs are created."
    )
    approval_ttl: Duration = Field(
        timedelta(minutes=15),
        description="How long a proposed step waits for its approvals; after it the step "
        "expires and must be proposed again.",
    )
    people: dict[str, PersonSettings] = Field(
        default_factory=dict,
        description="Who decides: person id -> `name`, `roles` (among `responder`, "
        "`second_line`, `admin`), and the identities that are theirs: `slack` (Slack user "
        "id), `console` (console login; default: the id), `email`, `proxy_user` (the name "
        "a trusted proxy signs in, `console.trusted_proxies`). One person is one approver "
        "whatever channel they decide through. Env: JSON, e.g. "
        '`{"alice": {"roles": ["responder"], "slack": "U024BE7LH"}}`. See docs/security.md.',
    )
    roles: dict[str, list[Role]] = Field(
        default_factory=dict,
        description="Older form of `people`, still read: key -> roles among `responder`, "
        "`second_line`, `admin`. A `slack:U024BE7LH` key gives the person with that Slack "
        "id the roles (or is a person of its own); any other key, the person with that "
        "console login (or a person of that id). Empty with `people` empty (the default): "
        "nobody may approve, so only `auto` steps run.",
    )
    worker_lease: Duration = Field(
        timedelta(seconds=60),
        ge=timedelta(seconds=5),
        description="How long a worker holds a running step before another may declare it "
        "interrupted (renewed while the action runs).",
    )
    worker_actions: int = Field(
        4,
        ge=1,
        le=64,
        description="How many actions one worker runs at once, each on a thread of its own "
        "(a drain or a reboot runs for many minutes). Proposing, timers, pages, expiry and "
        "reaping never wait for them; an approved step waits for a free slot.",
    )
    worker_poll: Duration = Field(
        timedelta(seconds=1),
        gt=timedelta(0),
        description="How often an idle worker looks for work it was not woken for.",
    )
    serve_worker: bool = Field(
        True,
        description="`serve` starts the worker (proposes and runs steps, fires timers) as "
        "a child process it supervises and wakes. Set false when workers run on their own "
        "(`runbook-bot worker`, e.g. a separate Deployment).",
    )
    slack_bot_token: SecretStr | None = Field(
        None,
        description="Slack bot token (`xoxb-...`). Set it (or `slack_bot_token_file`) to "
        "turn Slack on: incident cards, buttons and `/incident`. See docs/slack.md.",
    )
    slack_bot_token_file: Path | None = Field(
        None, description="File holding the bot token (a mounted Secret)."
    )
    slack_signing_secret: SecretStr | None = Field(
        None,
        description="The app's signing secret: every request to `/slack/events` must be "
        "signed with it (HTTP mode; required there).",
    )
    slack_signing_secret_file: Path | None = Field(
        None, description="File holding the signing secret."
    )
    slack_app_token: SecretStr | None = Field(
        None,
        description="App-level token (`xapp-...`, scope connections:write) for Socket Mode.",
    )
    slack_app_token_file: Path | None = Field(None, description="File holding the app token.")
    slack_mode: Literal["http", "socket"] = Field(
        "http",
        description="How Slack reaches the bot: `http` (Slack posts to `/slack/events`; the "
        "bot must be reachable) or `socket` (the bot opens a WebSocket to Slack: no inbound "
        "connection needed).",
    )
    slack_channel: str | None = Field(
        None,
        pattern=r"^[CGD][A-Z0-9]{2,20}$",
        description="Channel id where incident cards go (`C0123456789`); invite the bot.",
    )
    slack_api_url: str = Field(
        "https://slack.com/api/", description="Slack Web API base URL (tests point it at a fake)."
    )
    slack_timeout: Duration = Field(
        timedelta(seconds=10), gt=timedelta(0), description="Timeout of each Slack call."
    )
    slack_rate: float = Field(
        1.0,
        gt=0,
        le=20,
        description="Messages per second per channel at most (Slack allows about 1).",
    )
    slack_flood_cap: int = Field(
        10,
        ge=0,
        le=1000,
        description="Cards per alertname and severity in one `slack_flood_window`, below "
        "critical: past it, each further incident of the flood is counted in one "
        '"N more warning incidents" message, updated in place, instead of a card of its '
        "own (they stay in the console and `/incident list`). Critical incidents always "
        "get their card. 0: no cap.",
    )
    slack_flood_window: Duration = Field(
        timedelta(minutes=15),
        ge=timedelta(minutes=1),
        description="The window `slack_flood_cap` counts cards in.",
    )
    slack_role_groups: dict[Role, list[str]] = Field(
        {},
        description="Slack user groups whose members have a role, e.g. `{responder: "
        "[S0123ONCALL], second_line: [S0456SRE]}`: a member gets the role as the person "
        "whose `slack` id they are (or as `slack:U0123ABC`, a person of their own).",
    )
    slack_groups_ttl: Duration = Field(
        timedelta(minutes=5),
        ge=timedelta(seconds=10),
        description="How long user-group memberships are cached.",
    )
    bmc: BmcSettings = Field(
        default_factory=BmcSettings,
        description="BMC inventory and limits: `credentials` (profiles: `username` and "
        "`password_file` or `password_env`, `allow_annotations` (false: annotated nodes may "
        "not use this login)), `nodes` (node: `protocol` ipmi|redfish, "
        "`address`, `port`, `credentials`, `system`, `scheme`, `cipher_suite`, `verify_tls`, "
        "`ca_file`), "
        "`annotations` (false; true: unlisted nodes may name their BMC in "
        "`runbook-bot/bmc-*` annotations, only at an IP address inside `allowed_networks` "
        "and only with a profile that has `allow_annotations: true`), "
        "`allowed_networks` (CIDRs an annotated BMC address must be in; hostnames refused), "
        "`timeout` (10s per call), `power_timeout` (5m to see the new power state), "
        "`attempts` (3). See docs/bmc.md.",
    )

    escalation: EscalationSettings = Field(
        default_factory=EscalationSettings,
        description="Who is paged and when: `policies` per severity (`levels: [{after: 0m, "
        "notify: [oncall]}, ...]`, `repeat`, `repeat_after`, `ack_timeout`, "
        "`working_hours_only`), `working_hours` (`timezone`, `days`, `start`, `end`, "
        "`holidays`), `oncall` (rotation: `people`, `handover`, `every`, `start`), `vendor` "
        "and `targets` (PagerDuty, webhook, WeCom, DingTalk, Feishu, e-mail). Defaults: the "
        "seed's rules. See docs/escalation.md.",
    )
    console: ConsoleSettings = Field(
        default_factory=ConsoleSettings,
        description="The built-in web console at `/` (incident list, cards with buttons, the "
        "live log, follow-ups, postmortem drafts): `enabled`, `users` (name: "
        "`password_hash` from `runbook-bot console hash-password`, `roles`, `name`), "
        "`admin_token` or `admin_token_file`, `session_secret` or `session_secret_file` "
        "(set it with more than one replica), `session_ttl` (12h), `secure_cookies` (true "
        "behind TLS), `public_url`, `login_throttle_size` (10000 user and address pairs "
        "with recent failed logins counted), `trusted_proxies` (CIDRs of a sign-in proxy "
        "whose `X-Forwarded-User`/`X-Forwarded-Email` name the person; ignored from "
        "anywhere else). See docs/console.md.",
    )
    digest_day: Day = Field(
        "mon",
        description="Weekday the weekly postmortem digest (follow-ups; the week's incidents "
        "with MTTA and MTTR) is posted to `slack_channel`, for the last full week (Monday "
        "to Sunday) before it; in `escalation.working_hours.timezone`.",
    )
    digest_time: time = Field(
        time(9, 0),
        description="Local time (working-hours timezone) the weekly digest is posted at on "
        "`digest_day`; a digest found late is still posted, once.",
    )
    postmortem_lang: Literal["zh", "en"] = Field(
        "en",
        description="Language of postmortem drafts when none is asked for: `zh` (the "
        "handbook's template) or `en`.",
    )
    postmortem_templates: Path | None = Field(
        None,
        description="Directory of your own postmortem templates (`5why.zh.md.j2`, "
        "`5why.en.md.j2`); a file missing there comes from the shipped ones.",
    )
    worker_heartbeat: Duration = Field(
        timedelta(seconds=5),
        ge=timedelta(seconds=1),
        description="How often a worker records that it is alive (`runbook-bot workers`).",
    )
    timers_late_after: Duration = Field(
        timedelta(seconds=60),
        ge=timedelta(seconds=5),
        description="`/readyz` fails (check `timers`) and `runbook_bot_timers_late_seconds` "
        "rises when an escalation timer is overdue by more than this: no worker fires them.",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The YAML file arrives as init values; the environment must win over it.
        return env_settings, init_settings

    @field_validator("people")
    @classmethod
    def _people_distinct(cls, value: dict[str, PersonSettings]) -> dict[str, PersonSettings]:
        return check_people(value)

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        return _database_url(value)

    @field_validator("database_migration_url")
    @classmethod
    def _known_migration_database(cls, value: str | None) -> str | None:
        return None if value is None else _database_url(value)

    @field_validator("log_key_file")
    @classmethod
    def _key_is_a_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            _read_log_key(value)  # a missing or short key stops the start, not an append
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.lower()
        if level not in {"debug", "info", "warning", "error"}:
            raise ValueError("use one of debug, info, warning, error")
        return level

    @model_validator(mode="after")
    def _auth_is_consistent(self) -> Settings:
        if self.webhook_token is not None and self.webhook_token_file is not None:
            raise ValueError("set webhook_token or webhook_token_file, not both")
        if (self.webhook_username is None) != (self.webhook_password is None):
            raise ValueError("webhook_username and webhook_password go together")
        if self.webhook_token_file is not None and not self.webhook_token_file.is_file():
            raise ValueError(f"webhook_token_file {self.webhook_token_file} is not a file")
        return self

    @model_validator(mode="after")
    def _slack_is_consistent(self) -> Settings:
        for name in ("slack_bot_token", "slack_signing_secret", "slack_app_token"):
            if getattr(self, name) is not None and getattr(self, f"{name}_file") is not None:
                raise ValueError(f"set {name} or {name}_file, not both")
            path = getattr(self, f"{name}_file")
            if path is not None and not path.is_file():
                raise ValueError(f"{name}_file {path} is not a file")
        if self.slack_enabled:
            if self.slack_channel is None:
                raise ValueError("Slack is on (slack_bot_token): set slack_channel too")
            if self.slack_mode == "http" and self.slack_secret("signing_secret") is None:
                raise ValueError("slack_mode http needs slack_signing_secret")
            if self.slack_mode == "socket" and self.slack_secret("app_token") is None:
                raise ValueError("slack_mode socket needs slack_app_token (xapp-...)")
        return self

    @property
    def slack_enabled(self) -> bool:
        return self.slack_bot_token is not None or self.slack_bot_token_file is not None

    def slack_secret(self, name: Literal["bot_token", "signing_secret", "app_token"]) -> str | None:
        """A Slack secret, read from its file when one is set."""
        value: SecretStr | None = getattr(self, f"slack_{name}")
        if value is not None:
            return value.get_secret_value()
        path: Path | None = getattr(self, f"slack_{name}_file")
        return path.read_text().strip() if path is not None else None

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def log_key(self) -> bytes | None:
        """The incident log's HMAC key, read from `log_key_file`; None when unset."""
        return None if self.log_key_file is None else _read_log_key(self.log_key_file)

    def bearer_token(self) -> str | None:
        """The configured webhook bearer token, read from its file when one is set."""
        if self.webhook_token is not None:
            return self.webhook_token.get_secret_value()
        if self.webhook_token_file is not None:
            return self.webhook_token_file.read_text().strip()
        return None


LOG_KEY_MIN_BYTES = 32


def _read_log_key(path: Path) -> bytes:
    """The key in `path`, surrounding whitespace removed. The message never shows it."""
    try:
        key = path.read_bytes().strip()
    except OSError as exc:
        raise ValueError(
            f"cannot read {path} ({exc.strerror}); mount the log key Secret there"
        ) from None
    if len(key) < LOG_KEY_MIN_BYTES:
        raise ValueError(
            f"{path} holds {len(key)} bytes; the log key needs at least {LOG_KEY_MIN_BYTES} "
            "(make one with `openssl rand -hex 32`)"
        )
    return key


def _database_url(value: str) -> str:
    if value.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + value.split("://", 1)[1]
    if not (value.startswith(("sqlite:///", "postgresql+psycopg://"))):
        raise ValueError("use sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB")
    return value


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Build settings from the environment over `overrides` and the YAML file (over the
    defaults). ConfigInvalid says, for each bad setting, what is wrong and where it was
    set."""
    sources = Sources.read(Settings, config_file, arguments=list(overrides))
    return settings_from(sources, **overrides)


def settings_from(sources: Sources, **overrides: Any) -> Settings:
    """The settings `sources` (read with `Sources.read`) and `overrides` give."""
    values = {**sources.values, **overrides}
    try:
        return Settings(**values)
    except ValidationError as exc:
        raise ConfigInvalid(describe(exc, sources, Settings)) from None
    except SettingsError as exc:  # the environment source failed in a way not checked first
        raise ConfigInvalid(f"invalid settings: {exc}") from None


def reference_markdown() -> str:
    """The settings reference, generated from the model (`docs/configuration.md`)."""
    rows = [
        "# Configuration",
        "",
        "Settings come from, highest priority first: environment variables "
        f"`{ENV_PREFIX}<NAME>`, the YAML file given by `--config` or `{CONFIG_ENV}`, and the "
        "defaults below. Durations are written like `30s`, `15m`, `1h30m`, `7d`; structured "
        "settings (`roles`, `bmc`, `console`, ...) are JSON in an environment variable. "
        "Invalid settings stop every command at start (exit 2) with one line per problem: "
        "the setting, what is wrong, and the variable or FILE:LINE that set it; a misspelt "
        "key, at any depth, gets the key it probably meant.",
        "",
        "`runbook-bot config` prints the settings in effect: each one's value and where it "
        "came from (`default`, `file FILE:LINE`, `env VARIABLE`), with tokens, passwords, "
        "keys, signing secrets and password hashes masked (`-o json` for scripts). This "
        "page is `runbook-bot config --reference`; a test keeps it current.",
        "",
        "| YAML key | environment variable | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            shown = f"see docs/{name}.md"
        elif isinstance(default, timedelta):
            shown = format_duration(default)
        elif default is None:
            shown = "unset"
        else:
            shown = str(default)
        rows.append(
            f"| `{name}` | `{ENV_PREFIX}{name.upper()}` | `{shown}` | {field.description} |"
        )
    return "\n".join(rows) + "\n"
