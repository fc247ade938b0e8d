"""The HTTP side of the Redfish backend: one BMC's httpx client, and the one place its
failures are translated.

`RedfishClient.send` is the only code that talks to httpx. It follows paths on the BMC
only, so the login is never sent to a host a link points at. Timeouts, refused
connections, 429 and 5xx become `TemporaryActionError` (with the `Retry-After` delay); a
refused login or account (401, 403) `CredentialsRefused`; the rest (untrusted certificate,
missing resources, answers that are not Redfish) `PermanentActionError`, carrying the
Redfish error message when the BMC sent one.
The password only ever goes into httpx's `BasicAuth`: never into a message or a log line.
"""

from __future__ import annotations

import logging
import ssl
from typing import Any

import httpx

from bot import retrying
from bot.actions.bmc.protocol import BmcTarget, Credentials
from bot.errors import (
    ActionError,
    CredentialsRefused,
    PermanentActionError,
    TemporaryActionError,
)

logger = logging.getLogger(__name__)

Doc = dict[str, Any]

DEFAULT_PORTS = {"https": 443, "http": 80}
MAX_DETAIL = 300


class RedfishClient:
    """HTTP to one BMC's Redfish service; every request has its own `timeout` (seconds)."""

    def __init__(
        self,
        target: BmcTarget,
        credentials: Credentials,
        *,
        timeout: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        port = target.port or DEFAULT_PORTS[target.scheme]
        address = target.address.strip("[]")
        host = f"[{address}]" if ":" in address else address
        self._http = httpx.Client(
            base_url=f"{target.scheme}://{host}:{port}",
            auth=httpx.BasicAuth(credentials.username, credentials.password.get_secret_value()),
            verify=tls_context(target),
            timeout=httpx.Timeout(timeout),
            headers={"Accept": "application/json", "OData-Version": "4.0"},
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def get(self, path: str, *, missing: str = "") -> Doc:
        """The JSON object at `path`; `missing` is added to the message of a 404."""
        response = self.send("GET", path, missing=missing)
        try:
            doc = response.json()
        except ValueError as exc:
            raise self.malformed(path, "the answer is not JSON") from exc
        if not isinstance(doc, dict):
            raise self.malformed(path, "the answer is not a JSON object")
        return doc

    def send(
        self,
        method: str,
        path: str,
        *,
        body: Doc | None = None,
        handled: tuple[int, ...] = (),
        missing: str = "",
    ) -> httpx.Response:
        """The answer to one request, if it succeeded or its status is `handled`."""
        where = self.target.where()
        if not path.startswith("/") or path.startswith("//"):
            # httpx would send an absolute link's request, with our login, to its host.
            raise PermanentActionError(
                f"{where} links to {path}, off the BMC; only paths on the BMC are followed, "
                "so its login is never sent elsewhere"
            )
        try:
            response = self._http.request(method, path, json=body)
        except httpx.TimeoutException as exc:
            raise TemporaryActionError(
                f"{where} did not answer {method} {path} within {self.timeout:g} s (bmc.timeout)"
            ) from exc
        except httpx.ConnectError as exc:
            raise self._connect_error(exc, method, path) from exc
        except httpx.HTTPError as exc:
            raise TemporaryActionError(f"{where}: {method} {path} failed: {exc}") from exc
        status = response.status_code
        logger.debug("%s: %s %s -> %s", where, method, path, status)
        if status in handled or status < 300:
            return response
        detail = error_detail(response)
        profile = self.target.credentials
        # The profile comes before the BMC's own words, which may be long: a card that
        # cuts the line still names what to fix.
        if status == 401:
            raise CredentialsRefused(
                f"{where} refused the login of credentials profile {profile!r} "
                f"(HTTP 401{detail}); check its user and password in bmc.credentials"
            )
        if status == 403:
            raise CredentialsRefused(
                f"{where} does not allow {method} {path} for the user of credentials profile "
                f"{profile!r} (HTTP 403{detail}); give that account the rights on the BMC "
                "or change the profile in bmc.credentials"
            )
        if status == 404:
            raise PermanentActionError(f"{where} has no {path} (HTTP 404){detail}{missing}")
        if status == 429 or status >= 500:
            raise TemporaryActionError(
                f"{where} answered HTTP {status} to {method} {path}{detail}; try again later",
                delay=retrying.retry_after(response.headers.get("Retry-After"), default=5.0),
            )
        raise PermanentActionError(f"{where} refused {method} {path} (HTTP {status}){detail}")

    def malformed(self, path: str, problem: str) -> PermanentActionError:
        return PermanentActionError(
            f"{self.target.where()} answered {path} with something that is not Redfish: {problem}"
        )

    def _connect_error(self, exc: httpx.ConnectError, method: str, path: str) -> ActionError:
        where, node = self.target.where(), self.target.node
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ssl.SSLError):
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, ssl.SSLCertVerificationError):
            trusted = (
                f"the CA in {self.target.ca_file}"
                if self.target.ca_file
                else "the system trust store"
            )
            return PermanentActionError(
                f"the TLS certificate of {where} is not trusted by {trusted} "
                f"({cause.verify_message or cause.reason}); set bmc.nodes.{node}.ca_file to "
                "the BMC's CA"
            )
        if isinstance(cause, ssl.SSLError):
            return PermanentActionError(
                f"the TLS handshake with {where} failed ({cause.reason or cause}); check "
                f"bmc.nodes.{node}.scheme and port"
            )
        return TemporaryActionError(f"cannot connect to {where} for {method} {path}: {exc}")


def tls_context(target: BmcTarget) -> ssl.SSLContext | bool:
    """What httpx verifies the BMC's certificate with; False for http or verify_tls off."""
    if target.scheme == "http" or not target.verify_tls:
        return False
    try:
        if target.ca_file is not None:
            return ssl.create_default_context(cafile=str(target.ca_file))
        # The system store, where a site installs its BMC CA; not certifi's bundle.
        return ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise PermanentActionError(
            f"cannot load the CA certificate {target.ca_file} for {target.where()} "
            f"({reason}); set bmc.nodes.{target.node}.ca_file to the BMC's CA (PEM)"
        ) from exc


def error_detail(response: httpx.Response) -> str:
    """The Redfish error message of an answer, if it has one: `: <message>`."""
    try:
        error = response.json().get("error", {})
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    messages = [
        m.get("Message")
        for m in error.get("@Message.ExtendedInfo", [])
        if isinstance(m, dict) and isinstance(m.get("Message"), str)
    ] or [error.get("message")]
    text = " ".join(m for m in messages if isinstance(m, str)).strip()
    return f": {text[:MAX_DETAIL]}" if text else ""
