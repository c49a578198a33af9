"""corral - a client of `corral serve`, the daemon of corral's Linux
sandboxes (docs/API.md).  Standard library only.

    import corral
    with corral.Client().create() as sb:
        print(sb.run("echo hi").stdout)
"""
from .client import Client, Lease, UnixHTTPConnection, default_socket
from .errors import (APIError, BadRequest, Busy, ConnectionFailed, Conflict,
                     CorralError, Forbidden, Gone, InternalError, MethodNotAllowed,
                     NoSpace, NotFound, NotSupported, PolicyRejected, TooLarge,
                     Unauthorized)
from .sandbox import Files, Process, Result, Sandbox

__all__ = [
    "Client", "Lease", "UnixHTTPConnection", "default_socket", "Sandbox", "Process", "Files",
    "Result", "CorralError", "ConnectionFailed", "APIError", "BadRequest",
    "Unauthorized", "Forbidden", "NotFound", "MethodNotAllowed", "Conflict",
    "TooLarge", "PolicyRejected", "InternalError", "NotSupported", "Busy", "NoSpace",
    "Gone",
]
__version__ = "0.1.0"
