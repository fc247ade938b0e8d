"""`ApiError`: a failure the simulated API answers with a v1 Status body.

The constructors reproduce the real apiserver's reasons and message texts
(k8s.io/apimachinery/pkg/api/errors), since clients and people match on them.
"""

from __future__ import annotations

from typing import Any

from bot.sim.kinds import Kind

_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def reason_for(code: int) -> str:
    return _REASONS.get(code, "InternalError" if code >= 500 else "BadRequest")


class ApiError(Exception):
    """An error response; `body()` is the Status object the real API would send."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or reason_for(code)
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            status["details"] = self.details
        status["code"] = self.code
        return status


def success(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
    body["status"] = "Success"
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def _details(kind: Kind, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = kind.plural
    return details


def not_found(kind: Kind, name: str) -> ApiError:
    return ApiError(404, f'{kind.resource} "{name}" not found', details=_details(kind, name))


def already_exists(kind: Kind, name: str) -> ApiError:
    return ApiError(
        409,
        f'{kind.resource} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(kind, name),
    )


def conflict(kind: Kind, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {kind.resource} "{name}": {why}',
        reason="Conflict",
        details=_details(kind, name),
    )


def modified(kind: Kind, name: str) -> ApiError:
    return conflict(
        kind,
        name,
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
    )


def invalid(kind: Kind, name: str, field: str, problem: str) -> ApiError:
    group = f".{kind.group}" if kind.group else ""
    details = _details(kind, name)
    details["causes"] = [{"reason": "FieldValueInvalid", "message": problem, "field": field}]
    return ApiError(
        422, f'{kind.kind}{group} "{name}" is invalid: {field}: {problem}', details=details
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def no_route() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", details={})


def method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource")


PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


def unsupported_media_type(content_type: str, accepted: tuple[str, ...]) -> ApiError:
    return ApiError(
        415,
        f"the body of the request was in an unknown format ({content_type or 'none'}) - "
        f"accepted media types include: {', '.join(accepted)}",
    )
