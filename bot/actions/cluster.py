"""The Kubernetes connection and the one place its client errors are translated.

`connect` builds an `ApiClient` from settings (a kubeconfig and context, the standard
`KUBECONFIG`, or in-cluster config). `call` runs one API call with a timeout, retries
throttling and server errors a bounded number of times with backoff (waiting on the
action's clock), and turns what is left into `PermanentActionError` /
`TemporaryActionError` whose message names the cluster and what to check. Executors catch
`ApiException` themselves only for the statuses that mean something to them (a 404 on
eviction is success, a 429 names a PDB).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from bot import retrying
from bot.clock import Clock
from bot.config import Settings
from bot.errors import PermanentActionError, TemporaryActionError

T = TypeVar("T")
RETRY_STATUSES = {429, 500, 502, 503, 504}


def connect(settings: Settings) -> client.ApiClient:
    configuration = client.Configuration()
    try:
        if settings.kube_in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            # The client reads $KUBECONFIG once, at import; read it now, as kubectl does.
            path = settings.kubeconfig or os.environ.get("KUBECONFIG") or None
            config.load_kube_config(
                config_file=str(path) if path else None,
                context=settings.kube_context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (ConfigException, OSError) as exc:
        raise PermanentActionError(
            f"no usable Kubernetes configuration ({exc}); set KUBECONFIG or the kubeconfig "
            "setting, or kube_in_cluster: true when running in a pod"
        ) from exc
    # urllib3 retries connection errors itself; status retries are ours (see `call`).
    configuration.retries = urllib3.Retry(total=2, connect=2, read=0, status=0, backoff_factor=0.2)
    return client.ApiClient(configuration)


def reason(exc: ApiException) -> str:
    """The API server's own message from a Status body, else the HTTP reason."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or exc.reason or f"HTTP {exc.status}")


def call(
    what: str,
    fn: Callable[..., T],
    *args: Any,
    timeout: float,
    clock: Clock,
    attempts: int = 4,
    passthrough: Iterable[int] = (),
    **kwargs: Any,
) -> T:
    """Run `fn(*args, **kwargs)`; `what` says what it does, for messages ("cordon gpu-node-02").
    The backoff between attempts waits on `clock` (the action's, `ctx.clock`).

    Statuses in `passthrough` are re-raised as `ApiException` for the caller to interpret.
    """
    keep = set(passthrough)

    def transient(exc: BaseException) -> bool:
        if isinstance(exc, ApiException):
            return exc.status not in keep and exc.status in RETRY_STATUSES
        return isinstance(exc, (urllib3.exceptions.HTTPError, OSError))

    try:
        return retrying.call(
            lambda: fn(*args, _request_timeout=timeout, **kwargs),
            attempts=attempts,
            retry_if=transient,
            wait=retrying.backoff(0.5, 5.0),
            sleep=clock.sleep,
        )
    except ApiException as exc:
        if exc.status in keep:
            raise
        raise _translate(what, exc) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise TemporaryActionError(
            f"cannot {what}: the Kubernetes API is unreachable ({type(exc).__name__}: "
            f"{exc}); check the cluster address and network",
            delay=30,
        ) from exc


def _translate(what: str, exc: ApiException) -> Exception:
    status = exc.status or 0
    text = reason(exc)
    if status in (401, 403):
        return PermanentActionError(
            f"cannot {what}: the Kubernetes API refused it ({status}: {text}); check the "
            "bot's credentials and RBAC (deploy/rbac.yaml)"
        )
    if status == 404:
        return PermanentActionError(f"cannot {what}: not found ({text})")
    if status in RETRY_STATUSES or status == 0:
        return TemporaryActionError(f"cannot {what}: the API server answered {status}: {text}")
    return PermanentActionError(f"cannot {what}: {status} {text}")
