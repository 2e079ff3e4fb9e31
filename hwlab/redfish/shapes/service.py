"""What every shape's service has beside its systems: the protocol versions
(``/redfish``), the OData service document, and the SessionService.

A shared service's sessions are its first system's (the keeper's): a
session opened for one system is valid for all.
"""

from __future__ import annotations

from typing import Any

from bmaas.hwlab.http import error_body
from bmaas.hwlab.redfish import standard
from bmaas.hwlab.redfish.bmc import Bmc, Rendered, Session

__all__ = ["SERVICE", "SESSIONS", "login", "route"]

SERVICE = "/redfish/v1/SessionService"
SESSIONS = f"{SERVICE}/Sessions"
#: a POST to a collection's Members is a POST to the collection (DSP0266)
_LOGINS = (SESSIONS, f"{SESSIONS}/Members")


def _session(session: Session) -> dict[str, Any]:
    return {
        "@odata.type": "#Session.v1_3_0.Session",
        "@odata.id": f"{SESSIONS}/{session.id}",
        "Id": session.id,
        "Name": "User Session",
        "UserName": session.username,
        "Password": None,
    }


def login(keeper: Bmc, method: str, path: str, body: Any) -> Rendered | None:
    """A session login's answer: 201, the token and the session's
    ``Location`` (None: not a login)."""
    if method != "POST" or path not in _LOGINS:
        return None
    body = body if isinstance(body, dict) else {}
    username, password = body.get("UserName"), body.get("Password")
    if not (isinstance(username, str) and isinstance(password, str)):
        missing = error_body("Base.1.8.PropertyMissing", "UserName and Password are required")
        return standard.render((400, missing, ()))
    if not keeper.check_password(username, password):
        refused = error_body("Base.1.8.ResourceAtUriUnauthorized", "invalid credentials")
        return standard.render((401, refused, ()))
    session = keeper.open_session(username)
    code, headers, data = standard.render((201, _session(session), ()))
    where = f"{SESSIONS}/{session.id}"
    return code, [*headers, ("X-Auth-Token", session.token.reveal()), ("Location", where)], data


def route(keeper: Bmc, method: str, path: str) -> standard.Answer | None:
    """A read (or a logout) of the service's own documents (None: not one)."""
    fixed: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
        "/redfish": ({"v1": "/redfish/v1/"}, ("GET",)),
        "/redfish/v1/odata": (standard.ODATA, ("GET",)),
        SERVICE: (_service(), ("GET",)),
    }
    if path == SESSIONS:
        members = [f"{SESSIONS}/{s.id}" for s in keeper.sessions()]
        fixed[path] = (standard.collection(SESSIONS, "Session", members), ("GET", "POST"))
    elif path.startswith(f"{SESSIONS}/"):
        session = keeper.session_by_id(path.rsplit("/", 1)[1])
        if session is None:
            return 404, error_body("Base.1.8.ResourceMissingAtURI", f"no session at {path}"), ()
        if method == "DELETE":
            keeper.close_session(session.id)
            return 204, None, ()
        fixed[path] = (_session(session), ("GET", "DELETE"))
    if path not in fixed:
        return None
    document, allow = fixed[path]
    if method != "GET":
        return 405, error_body("Base.1.8.OperationNotAllowed", f"{method} on {path}"), allow
    return 200, document, allow


def _service() -> dict[str, Any]:
    return {
        "@odata.type": "#SessionService.v1_1_8.SessionService",
        "@odata.id": SERVICE,
        "Id": "SessionService",
        "Name": "Session Service",
        "ServiceEnabled": True,
        "SessionTimeout": 1800,
        "Sessions": {"@odata.id": SESSIONS},
    }
