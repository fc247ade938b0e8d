"""The IPMI backend: every call is one run of `ipmitool -I lanplus` against the node's BMC.

The password reaches ipmitool only through an inherited pipe (`-f /dev/fd/N`): written
into the pipe and its write end closed before ipmitool starts, so it is in neither the
command line (`ps`) nor the environment (`ps e`, /proc/PID/environ) of the child, and no
file holds it. The child gets a minimal environment and no stdin, and is killed when the
call's timeout runs out. ipmitool tries each request twice (`-R 1`); retrying
whole calls is the action layer's decision. Dates are printed in UTC (`-Z`) and under
LANG=C, so the SEL parser sees one format.

Failures are translated here, once, from ipmitool's stderr (`ipmitool.failure`): a BMC
that refuses the login or the user's privilege is a `CredentialsRefused`, one that refuses
otherwise a `PermanentActionError`, one that does not answer (or is busy) a
`TemporaryActionError`. Without -v, ipmitool prints the same line for a wrong password
and for a BMC that never answered (`Error: Unable to establish IPMI v2 / RMCP+ session`),
so that failure is diagnosed by one more run with -v, within the same timeout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

from bot.actions.bmc import ipmitool
from bot.actions.bmc.ipmitool import Failure
from bot.actions.bmc.protocol import (
    BmcInfo,
    BmcTarget,
    Credentials,
    PowerOp,
    PowerState,
    Reading,
    SelEntry,
)
from bot.errors import (
    ActionError,
    CredentialsRefused,
    PermanentActionError,
    TemporaryActionError,
)

T = TypeVar("T")

DEFAULT_PORT = 623
POWER_COMMANDS: dict[PowerOp, str] = {
    "on": "on",
    "soft_off": "soft",
    "off": "off",
    "cycle": "cycle",
}
PROBE = ("session", "info", "active")
"""What the diagnosing run asks for; any command would do, it fails at the login."""
PROBE_PER_TRY = 1


class IpmiBmc:
    """One node's BMC over IPMI v2 (RMCP+). ipmitool opens and closes a session per run."""

    def __init__(self, target: BmcTarget, credentials: Credentials, *, timeout: float) -> None:
        self.target = target
        self._credentials = credentials
        self._timeout = timeout
        # A BMC that never answers costs ipmitool two tries of -N seconds before it gives
        # up; the diagnosing run after it needs two tries of PROBE_PER_TRY. Both fit.
        self._per_try = max(1, int(timeout // 4))

    def power_state(self) -> PowerState:
        return self._read(ipmitool.power_state, "chassis", "power", "status")

    def request_power(self, op: PowerOp) -> None:
        # IPMI leaves a power cycle of a chassis that is off to the BMC: most refuse it,
        # some (and ipmi_sim) power on. Refuse it here, the same way for every BMC.
        if op == "cycle" and self.power_state() is PowerState.OFF:
            raise PermanentActionError(self._cannot_cycle())
        self._run("chassis", "power", POWER_COMMANDS[op])

    def sel(self, limit: int) -> list[SelEntry]:
        if limit < 1:
            return []
        entries = self._read(ipmitool.sel_entries, "sel", "elist", "last", str(limit))
        return entries[-limit:]

    def sensors(self) -> list[Reading]:
        return self._read(ipmitool.readings, "sensor", "list")

    def info(self) -> BmcInfo:
        return self._read(ipmitool.mc_info, "mc", "info")

    def close(self) -> None:
        """Nothing stays open between calls."""

    def _read(self, parse: Callable[[str], T], *command: str) -> T:
        output = self._run(*command)
        try:
            return parse(output)
        except ValueError as exc:
            raise PermanentActionError(
                f"unexpected output of `ipmitool {' '.join(command)}` from "
                f"{self.target.where()}: {exc}"
            ) from exc

    def _run(self, *command: str) -> str:
        deadline = time.monotonic() + self._timeout
        done = self._ipmitool(command, deadline, per_try=self._per_try)
        if done.returncode == 0:
            return done.stdout
        kind, why = ipmitool.failure(done.stderr), ipmitool.reason(done.stderr)
        if kind is Failure.SESSION:
            kind, why = self._diagnose(deadline, why)
        raise self._error(kind, command, why)

    def _diagnose(self, deadline: float, why: str) -> tuple[Failure, str]:
        """Why the session failed, from one run with -v (a wrong password prints
        `RAKP 2 HMAC is invalid`, a silent BMC `Get Auth Capabilities error`)."""
        done = self._ipmitool(PROBE, deadline, per_try=PROBE_PER_TRY, verbose=True)
        if done.returncode == 0:
            return Failure.SESSION, why  # it let us in this time: worth another try
        return ipmitool.failure(done.stderr), ipmitool.reason(done.stderr)

    def _ipmitool(
        self, command: tuple[str, ...], deadline: float, *, per_try: int, verbose: bool = False
    ) -> subprocess.CompletedProcess[str]:
        path = shutil.which("ipmitool")
        if path is None:
            raise PermanentActionError(
                f"ipmitool is not installed, needed to reach {self.target.where()}; "
                "apt-get install ipmitool"
            )
        argv = [path, *(["-v"] if verbose else []), "-I", "lanplus"]
        argv += ["-H", self.target.address, "-p", str(self.target.port or DEFAULT_PORT)]
        argv += ["-U", self._credentials.username, "-N", str(per_try), "-R", "1", "-Z"]
        if self.target.cipher_suite is not None:
            # Skips the cipher suite negotiation, which some BMCs never answer.
            argv += ["-C", str(self.target.cipher_suite)]
        env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C"}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._error(Failure.NO_ANSWER, command, "no time left")
        read_end = self._password_pipe()
        try:
            return subprocess.run(
                [*argv, "-f", f"/dev/fd/{read_end}", *command],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                encoding="utf-8",
                errors="replace",
                timeout=remaining,
                check=False,
                pass_fds=(read_end,),
            )
        except subprocess.TimeoutExpired as exc:
            raise self._error(Failure.NO_ANSWER, command, "ipmitool killed at the timeout") from exc
        except OSError as exc:
            raise PermanentActionError(
                f"cannot run {path} for {self.target.where()}: {exc.strerror}"
            ) from exc
        finally:
            os.close(read_end)

    def _password_pipe(self) -> int:
        """The read end of a pipe holding the password and a newline, write end closed.

        A password (at most 20 bytes in IPMI v2) is far below the pipe's buffer, so the
        write never blocks; ipmitool reads it as its password file."""
        read_end, write_end = os.pipe()
        try:
            os.write(write_end, self._credentials.password.get_secret_value().encode() + b"\n")
        except OSError:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        return read_end

    def _error(self, kind: Failure, command: tuple[str, ...], reason: str) -> ActionError:
        error_type, message = self._explain(kind, command, reason)
        # ipmitool never prints the password; should one ever, it stops here.
        password = self._credentials.password.get_secret_value()
        return error_type(message.replace(password, "********") if password else message)

    def _explain(
        self, kind: Failure, command: tuple[str, ...], reason: str
    ) -> tuple[type[ActionError], str]:
        where = self.target.where()
        user = self._credentials.username
        profile = self.target.credentials
        asked = f"`ipmitool {' '.join(command)}`"
        if kind is Failure.LOGIN:
            return CredentialsRefused, (
                f"{where} refused the login of user {user!r} (wrong password or unknown "
                f"user: {reason}); check the credentials profile {profile!r} (bmc.credentials)"
            )
        if kind is Failure.PRIVILEGE:
            return CredentialsRefused, (
                f"{where} does not let user {user!r} run {asked} ({reason}); give the user "
                "ADMINISTRATOR privilege on the BMC or change the credentials profile "
                f"{profile!r} (bmc.credentials)"
            )
        if kind is Failure.CIPHER:
            return PermanentActionError, (
                f"{where} offers no IPMI v2 cipher suite ipmitool accepts ({reason}); "
                "enable cipher suite 17 or 3 for IPMI over LAN on the BMC"
            )
        if kind is Failure.PRESENT_STATE and command[-1] == "cycle":
            return PermanentActionError, self._cannot_cycle()
        if kind in (Failure.PRESENT_STATE, Failure.REFUSED):
            return PermanentActionError, f"{where} refused {asked}: {reason}"
        if kind is Failure.BUSY:
            return TemporaryActionError, f"{where} is busy ({reason}); try again later"
        if kind is Failure.SESSION:
            return TemporaryActionError, (
                f"{where} did not open an IPMI session ({reason}); check that IPMI over LAN "
                "is enabled on the BMC"
            )
        port = self.target.port or DEFAULT_PORT
        return TemporaryActionError, (
            f"{where} did not answer within {self._timeout:g}s ({reason}); check that the "
            f"BMC is up and reachable on UDP port {port}"
        )

    def _cannot_cycle(self) -> str:
        return f"{self.target.where()} cannot power cycle: power is off; use power_on"
