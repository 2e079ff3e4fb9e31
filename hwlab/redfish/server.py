"""Many emulated Redfish BMCs in one process, each on its own port.

Like a rack of real servers, each machine gets its own BMC endpoint on
127.0.0.1 serving one system -- or, with :meth:`RedfishServer.add_service`,
several machines share one endpoint as the systems of one Redfish service
(a chassis manager, sushy-tools). One asyncio event loop (one thread) accepts on
every endpoint's listening socket and serves requests through the one
Redfish engine (:mod:`bmaas.hwlab.redfish.shapes.engine`), telling it which
BMC is answering by the port the request arrived on. A hang or a delay is a
suspended coroutine, so one misbehaving BMC never stalls its neighbours, and
hundreds of endpoints cost a socket and a few kilobytes each, not a thread.

Every request is evaluated against its machine's fault plan first; wire and
BMC effects are carried out on the socket and hardware effects are passed to
the machine (:mod:`bmaas.hwlab.redfish.answer`). ``bmc_reboot`` closes the
endpoint's listening socket (clients get "connection refused") until the
machine's BMC is back, whoever rebooted it: the IPMI emulator shares the
machine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import logging
import pathlib
import shutil
import socket
import ssl
import tempfile
import threading
import weakref
from collections.abc import Coroutine, Sequence
from typing import Any, Self, TypeVar

from bmaas.fakes.machine import FakeMachine
from bmaas.hwlab import http, ports
from bmaas.hwlab.redfish import events
from bmaas.hwlab.redfish.answer import answer
from bmaas.hwlab.redfish.bmc import Bmc, RequestRecord
from bmaas.hwlab.redfish.shapes import resolve as resolve_shape
from bmaas.hwlab.redfish.shapes.state import ShapeState
from bmaas.hwlab.tls import LabCertificate, ensure_certificate, make_certificate, server_context
from bmaas.secrets import Secret

__all__ = ["RedfishServer"]

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: how often the server checks for BMCs rebooted behind its back (by IPMI)
SWEEP_INTERVAL = 0.1
#: how long start/stop/add wait for the event loop before giving up
CONTROL_TIMEOUT = 10.0
#: a client that opens a TLS connection and says nothing is dropped after this
TLS_HANDSHAKE_TIMEOUT = 10.0
#: the largest request body a lab BMC reads (Redfish requests are small JSON)
MAX_REQUEST_BODY = 1024 * 1024


@dataclasses.dataclass(eq=False)
class _Connection:
    writer: asyncio.StreamWriter
    task: asyncio.Task[Any]
    #: the socket's own transport (under TLS, once the handshake started)
    raw: asyncio.WriteTransport
    secured: bool

    def cut(self) -> None:
        """Drop the connection now, without a goodbye."""
        if self.secured:
            self.writer.transport.abort()
        else:
            # Aborting a transport in the middle of start_tls makes CPython
            # 3.11's StreamWriter.start_tls fail with AttributeError and leak
            # the socket; cancelling the handshake closes it cleanly.
            self.task.cancel()


@dataclasses.dataclass(eq=False)
class _Endpoint:
    bmc: Bmc
    port: int
    sock: socket.socket | None  # bound, not yet handed to the loop
    server: asyncio.Server | None = None
    connections: set[_Connection] = dataclasses.field(default_factory=set)
    #: taken down for a BMC reboot: listen again once the machine's BMC is back
    rebooting: bool = False
    #: a shared service's systems by id and UUID (empty: one BMC, one system)
    systems: dict[str, Bmc] = dataclasses.field(default_factory=dict)

    def route(self, path: str) -> Bmc:
        """The BMC a request is for: the system its path names (or the
        system whose Manager or chassis it names) when the endpoint is a
        shared service, else the endpoint's own."""
        if self.systems:
            for prefix in ("/redfish/v1/Systems/", "/redfish/v1/Managers/", "/redfish/v1/Chassis/"):
                if path.startswith(prefix):
                    name = path[len(prefix) :].split("/", 1)[0].split("?", 1)[0]
                    found = self.systems.get(name)
                    if found is not None:
                        return found
        return self.bmc


class RedfishServer:
    """Emulated Redfish BMCs over :class:`~bmaas.fakes.machine.FakeMachine`.

    ``add`` a machine (before or after ``start``) to give it an endpoint;
    ``stop`` (idempotent) closes every socket and ends the loop thread.
    With ``tls=True`` a fresh CA signs the endpoints' certificate: point
    clients at :attr:`ca_path`. ``sse_keepalive``: seconds between ``:
    keepalive`` comments on an idle EventService stream (None: none at all,
    as OpenBMC's bmcweb; default :data:`~bmaas.hwlab.redfish.events.KEEPALIVE`).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        tls: bool = False,
        tls_dir: str | None = None,
        *,
        sse_keepalive: float | None = events.KEEPALIVE,
    ) -> None:
        self.host = host
        self.tls = tls
        #: seconds between keepalive comments on an idle SSE stream, for every
        #: BMC added from now on (None: none, as OpenBMC's bmcweb)
        self.sse_keepalive = sse_keepalive
        #: reuse the CA in this directory (a restarted worker keeps its
        #: predecessor's, so clients' redfish_verify_ca stays right)
        self._reuse_tls_dir = tls_dir
        self._endpoints: dict[int, _Endpoint] = {}
        self._ports: dict[str, int] = {}  # machine name -> port
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._tls_dir: pathlib.Path | None = None
        self._cert: LabCertificate | None = None
        self._ssl: ssl.SSLContext | None = None
        self._stopping = False
        self._raw: weakref.WeakSet[asyncio.WriteTransport] = weakref.WeakSet()

    def __repr__(self) -> str:
        state = "running" if self._thread else "stopped"
        return f"<RedfishServer {self.host} {len(self._endpoints)} BMCs {state}>"

    # -- public surface --------------------------------------------------------

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def ca_path(self) -> str | None:
        """The CA bundle that verifies this server's endpoints (TLS only)."""
        self._ensure_tls()
        return str(self._cert.ca_path) if self._cert else None

    def url(self, endpoint: int | str) -> str:
        """``scheme://host:port`` of an endpoint (by port or machine name)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self._endpoint(endpoint).port}"

    @property
    def endpoints(self) -> dict[str, int]:
        """Machine name -> port."""
        with self._lock:
            return dict(self._ports)

    def bmc(self, endpoint: int | str) -> Bmc:
        return self._endpoint(endpoint).bmc

    def request_count(self, endpoint: int | str) -> int:
        """HTTP requests this endpoint has read (answered or not)."""
        return self._endpoint(endpoint).bmc.request_count

    def requests(self, endpoint: int | str) -> list[RequestRecord]:
        """The latest requests this endpoint has read, oldest first."""
        return self._endpoint(endpoint).bmc.records()

    def add(
        self,
        machine: FakeMachine,
        *,
        username: str,
        password: str | Secret,
        port: int = 0,
        system_id: str | None = None,
        reset_types: Sequence[str] | None = None,
        shape: str | None = None,
    ) -> int:
        """Give ``machine`` a BMC endpoint; returns the port it listens on.

        ``system_id`` names the system in URLs (default: the machine's name);
        ``reset_types`` limits the ResetType values the system allows;
        ``shape`` serves a vendor's shape (:mod:`bmaas.hwlab.redfish.shapes`;
        its system id wins).
        """
        found = resolve_shape(shape)
        bmc = Bmc(
            machine,
            username=username,
            password=password,
            system_id=found.system_id if found is not None else system_id,
            reset_types=reset_types,
        )
        bmc.sse_keepalive = self.sse_keepalive
        if found is not None:
            bmc.shape = ShapeState(found, machine)
        return self._register([bmc], port, shared=False)

    def add_service(
        self,
        machines: Sequence[FakeMachine],
        *,
        username: str,
        password: str | Secret,
        port: int = 0,
    ) -> int:
        """Serve ``machines`` as the systems of **one** Redfish service on one
        port, as sushy-tools, chassis and enclosure managers (Dell MX, HPE
        Synergy) and multi-host OpenBMC do: one service root, one systems
        collection listing them all, one SessionService (a session opened
        for one system is valid for all; the first machine's BMC keeps the
        sessions and counts the logins), each system at
        ``/redfish/v1/Systems/<machine name>`` with its own fault plan, its
        own Manager (``/redfish/v1/Managers/<machine name>``) and its own
        virtual media. Returns the port."""
        if not machines:
            raise ValueError("a Redfish service needs at least one system")
        bmcs = [Bmc(m, username=username, password=password) for m in machines]
        for bmc in bmcs:
            bmc.peers = bmcs
            bmc.sse_keepalive = self.sse_keepalive
        return self._register(bmcs, port, shared=True)

    def _register(self, bmcs: list[Bmc], port: int, *, shared: bool) -> int:
        """Bind ``port`` for ``bmcs`` (one BMC, or a shared service's
        systems), listening at once if the server runs; the port."""
        names = [bmc.machine.name for bmc in bmcs]
        with self._lock:
            if taken := [name for name in names if name in self._ports]:
                raise ValueError(f"machines {taken} already have a Redfish endpoint")
        sock = ports.bind_listener(self.host, port)
        endpoint = _Endpoint(bmcs[0], sock.getsockname()[1], sock)
        for bmc in bmcs if shared else ():
            endpoint.systems[bmc.system_id] = endpoint.systems[bmc.uuid] = bmc
        with self._lock:
            self._endpoints[endpoint.port] = endpoint
            self._ports.update(dict.fromkeys(names, endpoint.port))
            loop = self._loop
        if loop is not None:
            self._run(self._listen(endpoint))
        return endpoint.port

    def start(self) -> Self:
        with self._lock:
            if self._thread is not None:
                return self
            self._ensure_tls()
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(_quiet_exception_handler)
            ready = threading.Event()
            thread = threading.Thread(
                target=self._loop_main, args=(loop, ready), name="hwlab-redfish", daemon=True
            )
            thread.start()
            ready.wait(CONTROL_TIMEOUT)
            self._loop, self._thread, self._stopping = loop, thread, False
        self._run(self._open())
        LOG.info("Redfish BMCs listening: %d endpoints on %s", len(self._endpoints), self.host)
        return self

    def stop(self) -> None:
        """Close every socket and end the loop thread. Safe to call twice."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            try:
                asyncio.run_coroutine_threadsafe(self._close(), loop).result(CONTROL_TIMEOUT)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(CONTROL_TIMEOUT)
        for endpoint in self._endpoints.values():
            if endpoint.sock is not None:
                endpoint.sock.close()
                endpoint.sock = None
        if self._tls_dir is not None:
            shutil.rmtree(self._tls_dir, ignore_errors=True)
            self._tls_dir = self._cert = self._ssl = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- plumbing --------------------------------------------------------------

    def _endpoint(self, key: int | str) -> _Endpoint:
        with self._lock:
            port = self._ports.get(key, key) if isinstance(key, str) else key
            found = self._endpoints.get(port)  # type: ignore[arg-type]
        if found is None:
            raise KeyError(f"no Redfish endpoint {key!r}")
        return found

    def _ensure_tls(self) -> None:
        if self.tls and self._ssl is None:
            if self._reuse_tls_dir is not None:
                self._tls_dir = pathlib.Path(self._reuse_tls_dir)
                self._cert = ensure_certificate(self._tls_dir, self.host)
            else:
                self._tls_dir = pathlib.Path(tempfile.mkdtemp(prefix="hwlab-redfish-tls-"))
                self._cert = make_certificate(self._tls_dir)
            self._ssl = server_context(self._cert)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None:
            coro.close()
            raise RuntimeError("the Redfish server is not running")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
        return future.result(CONTROL_TIMEOUT)

    @staticmethod
    def _loop_main(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _open(self) -> None:
        for endpoint in list(self._endpoints.values()):
            if endpoint.server is None:
                await self._listen(endpoint)
        self._spawn(self._sweep())

    async def _close(self) -> None:
        self._stopping = True  # from here on, nothing listens again
        for endpoint in self._endpoints.values():
            self._take_down(endpoint, reboot=False)
        # Connections accepted a moment ago may not have reached _connection
        # yet (asyncio sets them up in tasks of its own): cancel every task.
        for _ in range(3):
            await asyncio.sleep(0)
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # A TLS connection closed gracefully waits for the client's close_notify
        # with no task of ours behind it: cut what is still open underneath.
        for raw in list(self._raw):
            if not raw.is_closing():
                raw.abort()
        for _ in range(2):
            await asyncio.sleep(0)  # aborted transports close their sockets on the next turn

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _listen(self, endpoint: _Endpoint) -> None:
        held, endpoint.sock = endpoint.sock, None  # from add(), or held through a BMC reboot
        sock = ports.listen_again(held, self.host, endpoint.port)
        # TLS is started per connection (below), not here: a connection still
        # in its handshake would otherwise be invisible to stop() and leak.
        try:
            endpoint.server = await asyncio.start_server(
                functools.partial(self._connection, endpoint), sock=sock, limit=http.MAX_HEAD
            )
        except BaseException:
            sock.close()
            raise

    def _take_down(self, endpoint: _Endpoint, *, reboot: bool = True) -> None:
        """Stop listening and cut every connection: the BMC is gone (for now)."""
        endpoint.rebooting = reboot
        if endpoint.server is not None:
            endpoint.server.close()
            endpoint.server = None
        for connection in list(endpoint.connections):
            connection.cut()
        if reboot:
            endpoint.bmc.forget_sessions()
            events.forget(endpoint.bmc)  # subscriptions do not survive it
            # Keep the port through the window, bound but not listening:
            # connecting is refused as from a rebooting BMC, and nobody else
            # (another lab binding a free port) answers on it meanwhile. A
            # freed port once served another emulator's 404 to a test.
            endpoint.sock = ports.hold(self.host, endpoint.port)

    async def _sweep(self) -> None:
        """Follow each machine's BMC reboot windows, whoever started them."""
        while True:
            await asyncio.sleep(SWEEP_INTERVAL)
            for endpoint in list(self._endpoints.values()):
                if self._stopping:
                    return
                down = endpoint.bmc.machine.bmc_down()
                if down and endpoint.server is not None:
                    LOG.info("%s: BMC rebooting, port %d refuses", endpoint.bmc, endpoint.port)
                    self._take_down(endpoint)
                elif not down and endpoint.rebooting:
                    try:
                        await self._listen(endpoint)
                    except OSError as exc:  # someone took the port meanwhile: try again
                        LOG.warning("%s: cannot listen again: %s", endpoint.bmc, exc)
                    else:
                        endpoint.rebooting = False
                        LOG.info("%s: BMC back on port %d", endpoint.bmc, endpoint.port)

    # -- one connection ----------------------------------------------------------

    async def _connection(
        self, endpoint: _Endpoint, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self._stopping or endpoint.bmc.machine.bmc_down():
            writer.transport.abort()  # accepted in the instant before the port closed
            return
        task = asyncio.current_task()
        assert task is not None
        connection = _Connection(writer, task, writer.transport, secured=self._ssl is None)
        self._tasks.add(task)
        self._raw.add(connection.raw)
        endpoint.connections.add(connection)
        try:
            if self._ssl is not None:
                await writer.start_tls(self._ssl, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT)
                connection.secured = True
            while True:
                try:
                    request = await http.read_request(reader, max_body=MAX_REQUEST_BODY)
                except http.HttpError as exc:
                    response = http.redfish_error(exc.status, "Base.1.8.MalformedJSON", str(exc))
                    await http.write_response(writer, response, keep_alive=False)
                    break
                if request is None:
                    break
                endpoint.bmc.in_flight += 1  # the service's load (overload)
                try:
                    served = await answer(
                        endpoint.route(request.path),
                        request,
                        reader,
                        writer,
                        reboot=functools.partial(self._take_down, endpoint),
                        service=endpoint.bmc,
                    )
                finally:
                    endpoint.bmc.in_flight -= 1
                if not served:
                    break
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        except asyncio.CancelledError:
            # stop() or a BMC reboot cut the connection. Ending normally matters:
            # asyncio (3.11) logs a cancelled client_connected_cb as an error.
            pass
        finally:
            endpoint.connections.discard(connection)
            self._tasks.discard(task)
            if connection.secured:
                writer.close()


def _quiet_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Clients that vanish mid-handshake are routine in a fault lab: log, don't shout."""
    exc = context.get("exception")
    if isinstance(exc, ConnectionError | ssl.SSLError | OSError):
        LOG.debug("connection error: %s", context.get("message"))
        return
    loop.default_exception_handler(context)
