"""The daemon's refusals as exceptions: {"error": CODE, "detail": SENTENCE}
with its HTTP status (docs/API.md, "Errors"), one class a code."""


class CorralError(Exception):
    """Anything this client could not do; the base of the others."""


class ConnectionFailed(CorralError):
    """No answer from the daemon: no socket, refused, closed mid-answer."""


class APIError(CorralError):
    """The daemon answered with an error: status, code and detail as it said."""

    status = 0

    def __init__(self, status, code, detail):
        super().__init__("%s (HTTP %d %s)" % (detail, status, code))
        self.status = status
        self.code = code
        self.detail = detail


class BadRequest(APIError):
    """400 bad_request: bad JSON, unknown field, wrong type, bad path."""


class Unauthorized(APIError):
    """401 unauthorized: TCP without the right bearer token."""


class Forbidden(APIError):
    """403 forbidden: a file the sandbox's user may not read or write."""


class NotFound(APIError):
    """404 not_found: no such route, sandbox, process or file."""


class MethodNotAllowed(APIError):
    """405 method_not_allowed."""


class Conflict(APIError):
    """409 conflict: the sandbox is halted (detail: why), paused or going."""


class Gone(APIError):
    """410 gone: the sandbox was destroyed while the request waited."""


class TooLarge(APIError):
    """413 too_large: a body or file over the daemon's limit."""


class PolicyRejected(APIError):
    """422 policy: the loader's "KEY: reason (got ...)"."""


class InternalError(APIError):
    """500 internal: the sandbox could not be built; detail says why."""


class NotSupported(APIError):
    """501 not_supported: this host cannot do it (pause without a freezer)."""


class Busy(APIError):
    """503 busy: --max-sandboxes reached, or the daemon's workers (diffs,
    listings, archives) all taken; retry_after: the seconds the daemon
    said to wait (Retry-After), or None when it did not say."""


class NoSpace(APIError):
    """507 no_space: the sandbox's disk is full."""


BY_STATUS = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
    405: MethodNotAllowed, 409: Conflict, 410: Gone, 413: TooLarge, 422: PolicyRejected,
    500: InternalError, 501: NotSupported, 503: Busy, 507: NoSpace,
}


def _seconds(value):
    """Retry-After as whole seconds (RFC 9110), else None (a date is not used)."""
    value = (value or "").strip()
    return int(value) if value.isdigit() and len(value) < 10 else None


def from_answer(status, body, retry_after=None):
    """The exception for an error answer (its body as bytes, its
    Retry-After header if any)."""
    import json
    code, detail = "error", body.decode("utf-8", "replace")[:500] or "no detail"
    try:
        o = json.loads(body)
        if isinstance(o, dict):
            code = o.get("error", code)
            detail = o.get("detail", detail)
    except ValueError:
        pass
    e = BY_STATUS.get(status, APIError)(status, code, detail)
    e.retry_after = _seconds(retry_after)
    return e
