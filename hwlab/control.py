"""The lab's control API: a tiny JSON-over-HTTP service on loopback.

``hwlab fault add``, ``hwlab power`` and ``hwlab status`` talk to a running
lab through it, and so can tests, through :class:`LabClient`, which has the
same methods as an in-process :class:`~hwlab.lab.Lab`.

========  ======================  ===================================
method    path                    does
========  ======================  ===================================
GET       /status                 lab description and per-node state
POST      /faults/NODE            add rules ``{"rules": [...]}``
DELETE    /faults/NODE, /faults   clear one node's rules, or all
POST      /power/NODE             ``{"state": "on"|"off"}`` behind the BMC
POST      /shutdown               stop the lab
========  ======================  ===================================
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from bmaas.faults import BmaasError, InputError
from fakes.faults import FaultRule

__all__ = ["ControlServer", "Controllable", "LabClient", "LabNotRunning"]

LOG = logging.getLogger(__name__)


class LabNotRunning(BmaasError):
    """No lab answers at this state directory."""

    code = "lab_not_running"


class Controllable(Protocol):
    """What the control API drives: a :class:`hwlab.lab.Lab` or a
    :class:`hwlab.proxy.ProxyHost` (whose ``power`` refuses: it cannot
    reach behind a real BMC)."""

    def describe(self) -> dict[str, Any]: ...

    def status(self) -> dict[str, Any]: ...

    def add_faults(self, node: str, rules: Sequence[dict[str, Any] | FaultRule]) -> int: ...

    def clear_faults(self, node: str | None = None) -> None: ...

    def power(self, node: str, state: str) -> None: ...


class ControlServer:
    """Serve the control API of ``lab`` (a lab or a proxy host) on
    ``host``:``port`` (0: any free port)."""

    def __init__(
        self,
        lab: Controllable,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        on_shutdown: Callable[[], None] | None = None,
    ) -> None:
        self.lab = lab
        self.on_shutdown = on_shutdown
        handler = type("Handler", (_Handler,), {"control": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="hwlab-control", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        self.httpd.server_close()

    def dispatch(self, method: str, parts: list[str], body: dict[str, Any]) -> Any:
        lab = self.lab
        match method, parts:
            case "GET", ["status"]:
                return {**lab.describe(), **lab.status()}
            case "POST", ["faults", node]:
                rules = body.get("rules")
                if not isinstance(rules, list):
                    raise InputError("body must be {'rules': [...]}")
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
            case "POST", ["shutdown"]:
                if self.on_shutdown is not None:
                    threading.Thread(target=self.on_shutdown, daemon=True).start()
                return {"stopping": True}
        raise InputError(f"no such call: {method} /{'/'.join(parts)}")


class _Handler(BaseHTTPRequestHandler):
    control: ControlServer

    def _serve(self, method: str) -> None:
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            if not isinstance(body, dict):
                raise InputError("body must be a JSON object")
            result, status = self.control.dispatch(method, parts, body), 200
        except json.JSONDecodeError:
            result, status = {"error": "body is not JSON"}, 400
        except BmaasError as exc:
            result, status = {"error": str(exc), "code": exc.code}, 400
        data = json.dumps(result, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("control: " + format, *args)  # noqa: G003 - stdlib hands us a %-format


class LabClient:
    """Talk to a running lab's control API; same methods as :class:`Lab`."""

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    @classmethod
    def from_state_dir(cls, state_dir: str | Path) -> LabClient:
        path = Path(state_dir) / "lab.json"
        try:
            info = json.loads(path.read_text())
        except FileNotFoundError:
            raise LabNotRunning(f"no lab is running in {state_dir}") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise LabNotRunning(f"cannot read {path}: {exc}") from None
        if info.get("state") != "ready" or not info.get("control_url"):
            raise LabNotRunning(f"the lab in {state_dir} is {info.get('state', 'not ready')}")
        return cls(info["control_url"])

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - a loopback http URL we wrote
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
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
        return self._call("GET", "/status")

    def add_faults(self, node: str, rules: list[dict[str, Any] | FaultRule]) -> int:
        raw = [r.to_dict() if isinstance(r, FaultRule) else r for r in rules]
        return int(self._call("POST", f"/faults/{node}", {"rules": raw})["rules"])

    def clear_faults(self, node: str | None = None) -> None:
        self._call("DELETE", f"/faults/{node}" if node else "/faults")

    def power(self, node: str, state: str) -> None:
        self._call("POST", f"/power/{node}", {"state": state})

    def shutdown(self) -> None:
        self._call("POST", "/shutdown", {})
