"""Who may give a lab orders: its owner, from a program, not a web page.

The control API listens on loopback, which every user of the machine and
every web page a browser on it opens can reach (issue 36: as uid ``nobody``,
``POST /faults`` put a rule in force and ``POST /shutdown`` stopped root's
lab; a ``text/plain`` POST from ``http://evil.example`` was obeyed). Every
request is checked, in this order, before anything else is done:

=====================================  ======  ==========================================
check                                  status  closes
=====================================  ======  ==========================================
``Host`` is 127.0.0.1 or localhost     403     DNS rebinding: a page whose name resolves
(with this server's port, if any)              to 127.0.0.1 sends its own name as Host
``Origin``, when sent, is this         403     CSRF: a browser names the page that sent a
server's own origin                            request; a program sends none
``Authorization: Bearer TOKEN``        401     another user: the token is in a 0600 file
(compared in constant time)                    of a 0700 state directory
a write (POST/PUT/PATCH/DELETE) says   415     a form or ``text/plain`` fetch, which a
``Content-Type: application/json``             browser sends cross-origin unasked
=====================================  ======  ==========================================

A header sent twice is refused like a wrong one. A refusal never repeats
the token, and says which header to fix. Each refusal has a ``kind`` (``bad
host``, ``cross-origin``, ``no token``, ``wrong token``, ``not json``): the
server logs refusals by kind, at most one line per kind every 10 s with the
count it did not log (:mod:`bmaas.ratelog`), so a flood of them does not
fill its owner's disk.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence

__all__ = ["WRITES", "Refused", "check_request", "own_origins", "refusal_headers"]

#: methods that change something: they must carry a JSON body type
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: names a loopback control API is reached by
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


class Refused(Exception):
    """A request refused before it is looked at: ``status``, a one-line
    message, a stable ``code`` (the client reads it) and a ``kind`` (the
    class the server's log counts it under)."""

    def __init__(self, status: int, message: str, code: str, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.kind = kind


def _names(host: str) -> list[str]:
    names = [*LOOPBACK_NAMES]
    if host not in names and host not in ("0.0.0.0", "::", ""):  # noqa: S104 - compared, not bound
        names.append(f"[{host}]" if ":" in host else host)
    return names


def own_origins(host: str, port: int) -> frozenset[str]:
    """What a browser would send as ``Origin`` for a page served by this API."""
    return frozenset(f"http://{name}:{port}" for name in _names(host))


def _one(headers: Sequence[tuple[str, str]], name: str) -> tuple[int, str | None]:
    values = [v for k, v in headers if k.lower() == name]
    return len(values), (values[0].strip() if values else None)


def check_request(
    method: str,
    headers: Sequence[tuple[str, str]],
    *,
    token: str,
    host: str,
    port: int,
) -> None:
    """Raise :class:`Refused` unless the request may be served (the table above).

    ``host``/``port``: where the API listens; ``token``: the lab's secret."""
    count, value = _one(headers, "host")
    allowed = {f"{n}:{port}" for n in _names(host)} | set(_names(host))
    if count != 1 or value is None or value.lower() not in allowed:
        raise Refused(
            403,
            f"Host header must be 127.0.0.1:{port} or localhost:{port} "
            "(a request for another name is refused: DNS rebinding)",
            "forbidden_host",
            "bad host",
        )
    count, origin = _one(headers, "origin")
    if count > 1 or (count == 1 and origin not in own_origins(host, port)):
        raise Refused(
            403,
            "cross-origin request refused: the control API is not for web pages",
            "forbidden_origin",
            "cross-origin",
        )
    count, authorization = _one(headers, "authorization")
    scheme, _, given = (authorization or "").partition(" ")
    if (
        count != 1
        or scheme.lower() != "bearer"
        or not hmac.compare_digest(given.strip().encode(), token.encode())
    ):
        sent = count == 1 and scheme.lower() == "bearer" and given.strip()
        raise Refused(
            401,
            "missing or wrong token: send 'Authorization: Bearer TOKEN' with the token "
            "in the lab's state directory (STATE_DIR/token, readable by its owner only)",
            "unauthorized",
            "wrong token" if sent else "no token",
        )
    if method in WRITES:
        count, content_type = _one(headers, "content-type")
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if count != 1 or media != "application/json":
            raise Refused(
                415,
                f"{method} needs 'Content-Type: application/json'",
                "unsupported_media_type",
                "not json",
            )


def refusal_headers(refused: Refused) -> Iterable[tuple[str, str]]:
    """Headers a refusal carries: a 401 says which scheme (RFC 9110 11.6.1)."""
    if refused.status == 401:
        return [("WWW-Authenticate", 'Bearer realm="hwlab"')]
    return []
