"""The lab's control API: a tiny JSON-over-HTTP service on loopback.

``hwlab fault add``, ``hwlab power``, ``hwlab health`` and ``hwlab status`` talk to a running
lab through it, and so can tests, through :class:`LabClient`, which has the
same methods as an in-process :class:`~bmaas.hwlab.lab.Lab`.

The routes (``/status``, ``/faults``, ``/power``, ``/health``, ``/shutdown``)
are tabled in docs/lab.md ("Running a lab").

Only the lab's owner may call it, and only from a program: every request
carries ``Authorization: Bearer TOKEN`` (the token the server was given;
a lab writes it to ``STATE_DIR/token``, 0600), a loopback ``Host``, no
foreign ``Origin``, and a write a JSON content type
(:mod:`bmaas.hwlab.controlauth`). :class:`LabClient` adds the token;
:meth:`LabClient.from_state_dir` reads it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from bmaas.deadline import Deadline
from bmaas.fakes.faults import FaultRule
from bmaas.faults import BmaasError, InputError
from bmaas.hwlab import http, statefiles
from bmaas.hwlab.controlauth import Refused, check_request, refusal_headers
from bmaas.ratelog import RateLog, shown

__all__ = ["ControlServer", "Controllable", "LabClient", "LabNotRunning"]

LOG = logging.getLogger(__name__)


class LabNotRunning(BmaasError):
    """No lab answers at this state directory."""

    code = "lab_not_running"


class Controllable(Protocol):
    """What the control API drives: a :class:`bmaas.hwlab.lab.Lab` or a
    :class:`bmaas.hwlab.proxy.ProxyHost` (whose ``power`` refuses: it cannot
    reach behind a real BMC)."""

    def describe(self) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...

    def add_faults(self, node: str, rules: Sequence[dict[str, Any] | FaultRule]) -> int: ...

    def clear_faults(self, node: str | None = None) -> None: ...

    def power(self, node: str, state: str) -> None: ...

    def health(self, node: str, health: str) -> None: ...


#: bounds on what one control request may carry; each 4xx names the limit
MAX_CONTROL_BODY = 256 * 1024
MAX_RULES_PER_CALL = 64
MAX_NODE_NAME = 255
#: seconds a client may take to send one request (slow-loris guard)
REQUEST_TIMEOUT = 30.0


class ApiError(Exception):
    """A request the API refuses: ``status`` and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ControlServer:
    """Serve the control API of ``lab`` (a lab or a proxy host) on
    ``host``:``port`` (0: any free port) to whoever presents ``token``.

    Every request gets a status code and a JSON body; errors are one line,
    ``{"error": ..., "code": ...}``. Built on :mod:`bmaas.hwlab.http` (hwlab's one
    HTTP layer) in an event loop of its own; the lab's methods, which wait on
    worker processes, run in a small thread pool.
    """

    def __init__(
        self,
        lab: Controllable,
        *,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        on_shutdown: Callable[[], None] | None = None,
        refusals: RateLog | None = None,
    ) -> None:
        if not token:
            raise ValueError("the control API needs a token")
        self.lab = lab
        self.on_shutdown = on_shutdown
        self._token = token
        #: refusals logged by kind, one line per kind per 10 s (issue 44:
        #: one line per refusal, with its full path, filled the disk)
        self.refusals = refusals or RateLog(LOG, "control: refused")
        self._sock = socket.create_server((host, port))
        self._address: tuple[str, int] = self._sock.getsockname()[:2]
        self._loop = asyncio.new_event_loop()
        self._pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="hwlab-control")
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        host, port = self._address
        return f"http://{host}:{port}"

    def start(self) -> None:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)

            async def listen() -> None:
                self._server = await asyncio.start_server(
                    self._connection, sock=self._sock, limit=http.MAX_HEAD
                )

            self._loop.run_until_complete(listen())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="hwlab-control", daemon=True)
        self._thread.start()
        ready.wait(10)

    def stop(self) -> None:
        if self._thread is not None:

            async def close() -> None:
                if self._server is not None:
                    self._server.close()
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._thread = None
        if not self._loop.is_closed():
            self._loop.close()  # never started: its loop is closed all the same
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._sock.close()
        self.refusals.flush()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    request = await asyncio.wait_for(
                        http.read_request(reader, max_body=MAX_CONTROL_BODY), REQUEST_TIMEOUT
                    )
                except http.HttpError as exc:
                    await _reply(writer, exc.status, _error(str(exc), "bad_request"), False)
                    return
                except TimeoutError:
                    message = f"request not received within {REQUEST_TIMEOUT:g}s"
                    await _reply(writer, 408, _error(message, "timeout"), False)
                    return
                if request is None:
                    return
                status, body, headers = await self._answer(request)
                await _reply(writer, status, body, request.keep_alive, headers)
                if status == 200 and (request.method, _route(request.path)) == (
                    "POST",
                    ["shutdown"],
                ):
                    # Only now, with the answer written: stopping cancels this
                    # connection, and a client that lost its answer (`hwlab
                    # down`) falls back to SIGTERM, which can reach a process
                    # already past its handlers (exit -15 instead of 0).
                    if self.on_shutdown is not None:
                        threading.Thread(target=self.on_shutdown, daemon=True).start()
                    return
                if not request.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        except asyncio.CancelledError:
            # stop() cancels open connections (`hwlab down` arrives on one).
            # Ending quietly is deliberate: on Python 3.11 asyncio's own
            # done-callback for a cancelled connection task calls
            # task.exception(), which raises and logs a 15-line traceback.
            pass
        finally:
            writer.close()

    async def _answer(
        self, request: http.Request
    ) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        host, port = self._address
        try:
            check_request(request.method, request.headers, token=self._token, host=host, port=port)
        except Refused as exc:
            self.refusals.note(exc.kind, f"{exc.status} {request.method} {request.path}")
            return exc.status, _error(str(exc), exc.code), list(refusal_headers(exc))
        try:
            parts = _route(request.path)
            body = _body(request.body)
            result = await self._loop.run_in_executor(
                self._pool, self.dispatch, request.method, parts, body
            )
            return 200, result, []
        except ApiError as exc:
            return exc.status, _error(str(exc), "bad_request"), []
        except LabNotRunning as exc:
            return 503, _error(str(exc), exc.code), []
        except BmaasError as exc:
            return 400, _error(str(exc), exc.code), []
        except Exception as exc:
            LOG.exception("control: %s %s failed", shown(request.method), shown(request.path))
            return 500, _error(f"internal error: {type(exc).__name__}: {exc}", "internal"), []

    def dispatch(self, method: str, parts: list[str], body: dict[str, Any]) -> Any:
        lab = self.lab
        if len(parts) > 1 and len(parts[1]) > MAX_NODE_NAME:
            raise ApiError(414, f"node name longer than {MAX_NODE_NAME} (MAX_NODE_NAME)")
        match method, parts:
            case "GET", ["status"]:
                return {**lab.describe(), **lab.status()}
            case "POST", ["faults", node]:
                rules = body.get("rules")
                if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
                    raise ApiError(400, "body must be {'rules': [{...}, ...]}")
                if len(rules) > MAX_RULES_PER_CALL:
                    raise ApiError(
                        413,
                        f"{len(rules)} rules; at most {MAX_RULES_PER_CALL} per call "
                        "(MAX_RULES_PER_CALL)",
                    )
                return {"rules": lab.add_faults(node, rules)}
            case "DELETE", ["faults", node]:
                lab.clear_faults(node)
                return {"cleared": node}
            case "DELETE", ["faults"]:
                lab.clear_faults(None)
                return {"cleared": "all"}
            case "POST", ["power", node]:
                lab.power(node, str(body.get("state", "")))
                return {"node": node, "state": body.get("state")}
            case "POST", ["health", node]:
                lab.health(node, str(body.get("health", "")))
                return {"node": node, "health": body.get("health")}
            case "POST", ["shutdown"]:
                return {"stopping": True}  # stopped once answered: _connection
        known = ("GET", "POST", "DELETE")
        if method not in known:
            raise ApiError(405, f"method {method} not allowed (allowed: {', '.join(known)})")
        raise ApiError(404, f"no such call: {method} /{'/'.join(parts)}")


def _route(path: str) -> list[str]:
    """A request path's parts, as :meth:`ControlServer.dispatch` routes them."""
    return [urllib.parse.unquote(p) for p in path.split("/") if p]


def _body(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw, parse_constant=_not_finite)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "body is not JSON") from None
    except RecursionError:
        # json's decoder recurses once per level: 100,000 '[' were an HTTP 500
        raise ApiError(400, "body is nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object")
    return body


def _not_finite(constant: str) -> Any:
    """Python's json reads ``NaN`` and ``Infinity``, which JSON does not have;
    no number in this API may be one (:mod:`bmaas.validate`)."""
    raise ApiError(400, f"body has {constant}: every number must be finite")


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": " ".join(message.split()), "code": code}  # one line, always


async def _reply(
    writer: asyncio.StreamWriter,
    status: int,
    body: dict[str, Any],
    keep_alive: bool,
    headers: list[tuple[str, str]] | None = None,
) -> None:
    data = json.dumps(body, default=str).encode()
    response = http.Response(status, [("Content-Type", "application/json"), *(headers or [])], data)
    await http.write_response(writer, response, keep_alive=keep_alive)


#: no proxy, whatever ``http_proxy`` says: the API is on loopback, and the
#: token must not travel through anyone else
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class LabClient:
    """Talk to a running lab's control API; same methods as :class:`Lab`.

    Every call carries ``token`` (``Authorization: Bearer``; the lab's, from
    ``STATE_DIR/token``: :meth:`from_state_dir` reads it) and is bounded by
    a :class:`~bmaas.deadline.Deadline`: the one given (``deadline=``, a
    test's or a command's budget), at most ``timeout`` seconds from the
    call's start; connect, send and every read wait at most what it has left.
    A lab that accepts and never answers is :class:`LabNotRunning` by then."""

    def __init__(
        self, url: str, *, token: str, timeout: float = 30.0, deadline: Deadline | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self.timeout = timeout
        #: bounds every call of this client (with each call's own ``timeout``)
        self.deadline = deadline

    @classmethod
    def from_state_dir(
        cls, state_dir: str | Path, *, deadline: Deadline | None = None
    ) -> LabClient:
        path = Path(state_dir) / "lab.json"
        try:
            info = json.loads(statefiles.read_private(path))
        except FileNotFoundError:
            raise LabNotRunning(f"no lab is running in {state_dir}") from None
        except PermissionError:
            raise LabNotRunning(
                f"cannot read {path}: permission denied (only the lab's owner may control it)"
            ) from None
        except (OSError, json.JSONDecodeError) as exc:
            raise LabNotRunning(f"cannot read {path}: {exc}") from None
        if not isinstance(info, dict):
            raise LabNotRunning(f"cannot read {path}: not a JSON object")
        if info.get("state") != "ready" or not info.get("control_url"):
            raise LabNotRunning(f"the lab in {state_dir} is {info.get('state', 'not ready')}")
        url = str(info["control_url"])
        if urllib.parse.urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1"):
            # the token goes only to a loopback API (lab.json is the lab's, but check)
            raise LabNotRunning(f"{path}: control_url {url!r} is not on loopback; refused")
        return cls(url, token=statefiles.read_token(state_dir), deadline=deadline)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {self._token}",
        }
        request = urllib.request.Request(  # noqa: S310 - a loopback http URL we wrote
            self.url + path, data=data, method=method, headers=headers
        )
        deadline = Deadline.after(self.timeout)
        if self.deadline is not None:
            deadline = self.deadline.share(cap=self.timeout)
        if deadline.expired:
            raise LabNotRunning(f"the deadline passed before {method} {path}")
        try:
            # each socket step (connect, send, every read) gets what is left
            with _OPENER.open(request, timeout=deadline.left()) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", str(exc))
            except (json.JSONDecodeError, AttributeError):
                message = str(exc)
            raise InputError(message) from None
        except (urllib.error.URLError, OSError) as exc:
            raise LabNotRunning(f"the lab at {self.url} does not answer: {exc}") from None

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self._call("GET", "/status")
        return status

    def add_faults(self, node: str, rules: Sequence[dict[str, Any] | FaultRule]) -> int:
        raw = [r.to_dict() if isinstance(r, FaultRule) else r for r in rules]
        return int(self._call("POST", f"/faults/{node}", {"rules": raw})["rules"])

    def clear_faults(self, node: str | None = None) -> None:
        self._call("DELETE", f"/faults/{node}" if node else "/faults")

    def power(self, node: str, state: str) -> None:
        self._call("POST", f"/power/{node}", {"state": state})

    def health(self, node: str, health: str) -> None:
        self._call("POST", f"/health/{node}", {"health": health})

    def shutdown(self) -> None:
        self._call("POST", "/shutdown", {})
