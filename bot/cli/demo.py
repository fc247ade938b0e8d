"""`runbook-bot demo`: the whole flow on a laptop, with no Slack, cluster or BMC.

In one process: the simulator (four 8-GPU nodes in two rows, training jobs under budgets,
Redfish BMCs), the bot on SQLite in a directory of its own pointed at it and reading the
nodes' topology labels, its worker, the web console with four demo users, and the scenario
player that breaks the cluster and fires the seed's alerts (or a hot row's) through the
real webhook. It prints the console's URL and the logins.
SIGTERM or Ctrl-C stops everything and removes the temporary directory (exit 0).
"""

from __future__ import annotations

import argparse
import secrets
import signal
import socket
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import bot
from bot.cli import server as server_commands
from bot.config import Settings, load_settings
from bot.durations import parse_duration
from bot.errors import BotError, ConfigInvalid

USERS: dict[str, tuple[str, list[str]]] = {
    "oncall": ("responder", ["responder"]),
    "second": ("second_line", ["second_line"]),
    "admin": ("admin", ["admin"]),
    "viewer": ("no role: may look, may not decide", []),
}
"""The demo's console users: name -> (what the login line says, roles)."""
CHOICES = [
    "xid79",
    "node-down",
    "ib-partition",
    "storage",
    "overheating",
    "row-cooling",
    "all",
    "none",
]
"""The five emergencies, the failure domain's (a hot row: one incident), all five, none."""


def add_command(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="run the bot against a simulated GPU cluster, with a console and scenarios",
        description="Start, in one process, a simulated 4-node, 32-GPU cluster in two rows "
        "(a: gpu-node-01, 02; b: gpu-node-03, 04) with Redfish BMCs, the bot on SQLite "
        "pointed at it, its worker and the web console with demo users (oncall, second, "
        "admin, viewer); then fire the seed's alerts through the webhook. Ctrl-C stops it "
        "and removes its temporary directory.",
    )
    demo.add_argument(
        "--scenario",
        choices=CHOICES,
        default="xid79",
        help="one of the five emergencies, row-cooling (row a's air conditioning fails: "
        "one incident for the row), all (the five, one after another) or none "
        "(default xid79)",
    )
    demo.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    demo.add_argument("--port", type=int, default=8080, help="port; 0 picks one (default 8080)")
    demo.add_argument(
        "--dir", metavar="DIR", help="keep the database here (default: a temporary directory)"
    )
    demo.add_argument(
        "--delay",
        default="5s",
        help="wait before the first alert, from the first console login (default 5s)",
    )
    demo.add_argument(
        "--after",
        choices=["login", "start"],
        default="login",
        help="count --delay from the first console login (default) or from the start",
    )
    demo.add_argument("--every", default="45s", help="between scenarios with all (default 45s)")
    demo.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply the simulator's delays (grace periods, power and boot times, "
        "diagnostics); 0.1 = ten times faster (default 1)",
    )
    demo.add_argument(
        "--password", metavar="PW", help="one password for every demo user (default: random)"
    )
    demo.set_defaults(handler=demo_command)


def demo_command(args: argparse.Namespace, _: Settings) -> int:
    # SIGTERM while starting up stops as cleanly as later (the directory is removed);
    # run_service installs the same handler for its own run.
    signal.signal(signal.SIGTERM, _stop)
    delay, every = _seconds(args.delay, "--delay"), _seconds(args.every, "--every")
    if not 0 < args.time_scale <= 100:
        raise ConfigInvalid(
            f"--time-scale {args.time_scale:g} is out of range; give a factor above 0 and "
            "up to 100 (0.1 runs the simulator ten times faster)"
        )
    if args.password is not None and not args.password:
        raise ConfigInvalid("--password is empty; give one, or leave it out for random ones")
    runbooks, where = runbooks_dir()
    try:
        with ExitStack() as stack:
            folder = Path(args.dir) if args.dir else Path(stack.enter_context(_tempdir()))
            folder.mkdir(parents=True, exist_ok=True)
            _run(args, folder, runbooks, where, delay, every)
    except KeyboardInterrupt:
        pass  # Ctrl-C: everything above has stopped and the directory is gone
    return 0


@contextmanager
def _tempdir() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="runbook-bot-demo-") as path:
        yield path


def runbooks_dir() -> tuple[Path, str]:
    """The runbooks to load: ./runbooks in a checkout, else the ones packaged with the bot,
    else the checkout the package was installed from (`pip install -e .`); and which."""
    local = Path("runbooks")
    package = Path(bot.__file__).resolve().parent
    for path, what in (
        (local, "./runbooks"),
        (package / "_runbooks", "the runbooks packaged with runbook-bot"),
        (package.parent / "runbooks", f"{package.parent / 'runbooks'} (the source checkout)"),
    ):
        if path.is_dir() and any(path.glob("*.yaml")):
            return path.resolve(), what
    raise ConfigInvalid(
        "no runbooks found: run `runbook-bot demo` from the repository root (it loads "
        "./runbooks), or install runbook-bot from a checkout"
    )


def _seconds(text: str, option: str) -> float:
    try:
        return parse_duration(text).total_seconds()
    except ValueError as exc:
        raise ConfigInvalid(f"{option}: {exc}") from exc


def _run(
    args: argparse.Namespace,
    folder: Path,
    runbooks: Path,
    where: str,
    delay: float,
    every: float,
) -> None:
    from bot.chat.console.passwords import hash_password
    from bot.runbooks import catalog as catalogs
    from bot.sim import RedfishOptions, running
    from bot.sim import play as player
    from bot.sim.fleet import LEVELS
    from bot.sim.presets import demo_hall

    scenarios = player.expand(args.scenario)
    passwords = {user: args.password or secrets.token_urlsafe(9) for user in USERS}
    token = secrets.token_urlsafe(24)
    token_file = _secret(folder / "webhook-token", token)
    hall = demo_hall(grace_seconds=3, startup_seconds=1)
    scenario = hall.scenario
    # The namespace the bot's node Jobs (nvidia-smi, dcgmi, ibstat) run in.
    scenario = scenario.model_copy(update={"namespaces": [*scenario.namespaces, "runbook-bot"]})
    bmc_login = RedfishOptions("admin", secrets.token_urlsafe(12))
    sock = _bind(args.host, args.port)
    with running(scenario, redfish=bmc_login, time_scale=args.time_scale) as sim:
        bmc_password = folder / "bmc-password"
        bmc = sim.bmc_settings(bmc_password)
        bmc.update(timeout="5s", power_timeout="2m")
        kubeconfig = sim.write_kubeconfig(folder / "kubeconfig")
        settings = load_settings(
            None,
            database_url=f"sqlite:///{folder / 'runbook-bot.db'}",
            runbooks_dir=runbooks,
            kubeconfig=kubeconfig,
            bmc=bmc,
            webhook_token_file=token_file,
            roles={user: roles for user, (_, roles) in USERS.items() if roles},
            console={
                "users": {
                    user: {"password_hash": hash_password(passwords[user]), "roles": roles}
                    for user, (_, roles) in USERS.items()
                },
            },
            escalation={"oncall": {"people": ["oncall"]}},
            topology={"levels": LEVELS},
            log_level="warning",
        )
        catalog = catalogs.load(settings)
        port = sock.getsockname()[1]
        shown = f"[{args.host}]" if ":" in args.host else args.host
        url = f"http://{shown}:{port}/"
        play = player.Player(
            sim,
            url.replace("0.0.0.0", "127.0.0.1"),
            scenarios,
            delay=delay,
            every=every,
            token=token,
            said=_say,
            after_login=args.after == "login",
            fleet=hall,
        )

        def started() -> None:
            lines = [f"console: {url}"]
            lines += [
                f"login: {user} {passwords[user]} ({role})" for user, (role, _) in USERS.items()
            ]
            lines.append(f"runbooks: {where}")
            lines.append(f"database: {folder / 'runbook-bot.db'}")
            lines.append(
                f"webhook: POST {url}webhooks/alertmanager "
                f"(Authorization: Bearer, the token in {token_file})"
            )
            lines.append(f"cluster: kubectl --kubeconfig {kubeconfig} get nodes")
            lines.append(
                f"bmc: {sim.redfish_url}/redfish/v1 (Redfish; user {bmc_login.username}, "
                f"the password in {bmc_password})"
            )
            lines += _plan(scenarios, delay, every, args.after)
            lines.append("Ctrl-C stops the demo.")
            _say("\n".join(lines))
            play.start()

        try:
            server_commands.run_service(
                settings,
                catalog,
                host=args.host,
                port=port,
                sock=sock,
                started=started,
                on_console_login=play.logged_in,
            )
        finally:
            play.close()
            sock.close()


def _plan(scenarios: list[str], delay: float, every: float, after: str) -> list[str]:
    from bot.sim import alerts

    if not scenarios:
        return ["scenario: none (post your own alerts to the webhook)"]
    lines = []
    for index, name in enumerate(scenarios):
        e = alerts.scenario(name)
        at = delay + index * every
        when = f"{at:.0f}s after the first login" if after == "login" else f"in {at:.0f}s"
        lines.append(
            f"scenario {name} {when}: {e.what}; {e.alertname} ({e.severity}) -> runbook {e.runbook}"
        )
    return lines


def _stop(*_: object) -> None:
    raise SystemExit(0)


def _say(text: str) -> None:
    print(text, flush=True)


def _secret(path: Path, value: str) -> Path:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(value + "\n", encoding="utf-8")
    return path


def _bind(host: str, port: int) -> socket.socket:
    """The console's socket, bound now so that `--port 0` knows its port before it starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BotError(
            f"cannot listen on {host}:{port} ({exc.strerror}); pass --port 0 or another port"
        ) from exc
    return sock
