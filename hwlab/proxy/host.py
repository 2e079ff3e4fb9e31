"""Run proxies on one asyncio event loop in a background thread.

:class:`ProxyHost` is what ``hwlab proxy`` runs and what a lab starts for
its proxied nodes. It has the control methods of a lab (``add_faults``,
``clear_faults``, ``status``, ``describe``, ``power``), so the control API
(:class:`bmaas.hwlab.control.ControlServer`) serves either.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from bmaas.fakes.faults import FaultPlan, FaultRule, Firing
from bmaas.faults import BmaasError, InputError
from bmaas.hwlab.events import EventLog
from bmaas.hwlab.proxy.base import Proxy
from bmaas.hwlab.proxy.effects import check_rules
from bmaas.hwlab.proxy.ipmi import IPMIProxy
from bmaas.hwlab.proxy.redfish import RedfishProxy
from bmaas.hwlab.proxy.spec import ProxySpec

__all__ = ["ProxyError", "ProxyHost", "inventory_entry"]

LOG = logging.getLogger(__name__)
T = TypeVar("T")


class ProxyError(BmaasError):
    """A proxy could not start (port taken, upstream name unknown, ...)."""

    code = "proxy_error"


class ProxyHost:
    """Start, control and stop proxies; ``rules`` by node name."""

    def __init__(
        self,
        specs: Sequence[ProxySpec],
        *,
        rules: dict[str, Sequence[FaultRule]] | None = None,
        seed: int | str = 0,
        events_path: str | Path | None = None,
        tls_dir: str | Path | None = None,
    ) -> None:
        names = [s.node for s in specs]
        if len(set(names)) != len(names):
            raise InputError("two proxies with the same node name")
        self.specs = {s.node: s for s in specs}
        self.seed = seed
        self.tls_dir = tls_dir
        self.events_path = events_path
        #: the event log, open while the host runs
        self.events: EventLog | None = None
        #: where ``hwlab proxy`` wrote the inventory (shown by ``hwlab status``)
        self.inventory_path: Path | None = None
        self.proxies: dict[str, Proxy] = {}
        for spec in specs:
            node_rules = list((rules or {}).get(spec.node, ()))
            check_rules(node_rules, spec.protocol, credentials=spec.credentials, node=spec.node)
            plan = FaultPlan(node_rules, seed=seed, node=spec.node)
            self.proxies[spec.node] = self._make(spec, plan)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._count = 0  # effects carried out

    def _make(self, spec: ProxySpec, plan: FaultPlan) -> Proxy:
        if spec.protocol == "ipmi":
            return IPMIProxy(spec, plan, events=self._record)
        return RedfishProxy(spec, plan, events=self._record, tls_dir=self.tls_dir)

    def _record(self, firing: Firing) -> None:
        self._count += 1
        if self.events is not None:
            self.events(firing)

    # -- lifecycle -------------------------------------------------------------

    def start(self, *, timeout: float = 30.0) -> None:
        """Bind every proxy; raises ``ProxyError`` (after cleaning up) if one cannot."""
        if self.events_path is not None:
            Path(self.events_path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.events = EventLog(str(self.events_path))
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="hwlab-proxy", daemon=True)
        self._thread.start()
        try:
            for name, proxy in self.proxies.items():
                try:
                    self._run(proxy.start(), timeout)
                except OSError as exc:
                    spec = proxy.spec
                    raise ProxyError(
                        f"node {name!r}: cannot start the {spec.protocol} proxy on "
                        f"{spec.listen_host}:{spec.listen_port} for {spec.upstream}: "
                        f"{exc.strerror or exc}"
                    ) from None
                LOG.info(
                    "%s: %s proxy on %s:%d -> %s",
                    name,
                    proxy.protocol,
                    proxy.spec.listen_host,
                    proxy.port,
                    proxy.spec.upstream,
                )
        except BaseException:
            self.stop()
            raise

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop every proxy and the loop thread; nothing left listening. Safe twice."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            self._close_events()
            return
        for proxy in self.proxies.values():
            try:
                self._run(proxy.stop(), timeout)
            except Exception:  # stop the others whatever one of them does
                LOG.exception("%s: error while stopping", proxy.spec.node)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None
        self._close_events()

    def _close_events(self) -> None:
        if self.events is not None:
            self.events.close()
            self.events = None

    def __enter__(self) -> ProxyHost:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        assert self._loop is not None, "proxy host not started"
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ProxyError("the proxy loop did not answer in time") from None

    def _call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the proxy loop (proxies are not thread-safe)."""

        async def wrapper() -> T:
            return fn()

        if self._loop is None:
            return fn()
        return self._run(wrapper())

    # -- control (the same methods as bmaas.hwlab.lab.Lab) ----------------------------

    @property
    def endpoints(self) -> dict[str, dict[str, int]]:
        return {name: {p.protocol: p.port} for name, p in self.proxies.items()}

    def proxy(self, node: str) -> Proxy:
        try:
            return self.proxies[node]
        except KeyError:
            known = ", ".join(sorted(self.proxies)) or "none"
            raise InputError(f"no proxied node {node!r} (proxied nodes: {known})") from None

    def add_faults(self, node: str, rules: Sequence[dict[str, Any] | FaultRule]) -> int:
        """Put rules in force on ``node`` now; returns how many it has.
        Rules the proxy cannot carry out are refused, none is added."""
        proxy = self.proxy(node)
        parsed = [
            r if isinstance(r, FaultRule) else FaultRule.from_dict(r, where=f"rule[{i}]")
            for i, r in enumerate(rules)
        ]
        spec = proxy.spec
        check_rules(parsed, spec.protocol, credentials=spec.credentials, field="rule", node=node)
        for rule in parsed:
            proxy.plan.add(rule)
        return len(proxy.plan.rules)

    def clear_faults(self, node: str | None = None) -> None:
        targets = [self.proxy(node)] if node is not None else list(self.proxies.values())
        for proxy in targets:
            proxy.plan.clear()
            self._call(proxy.flush)

    def power(self, node: str, state: str) -> None:
        self.proxy(node)
        raise InputError(
            f"node {node!r} is a proxy in front of a real BMC: hwlab cannot switch its "
            "power behind the BMC's back (use the BMC itself, or an emulated node)"
        )

    def health(self, node: str, health: str) -> None:
        self.proxy(node)
        raise InputError(
            f"node {node!r} is a proxy in front of a real BMC: its health is the BMC's "
            "own (set it on an emulated node)"
        )

    def node_status(self, node: str) -> dict[str, Any]:
        proxy = self.proxy(node)
        info = self._call(proxy.status)
        return {
            "power": "(proxied)",
            "bmc_down": info["bmc_down"],
            "proxy": info,
            "rules": [r.describe() for r in proxy.plan.rules],
            "fired": proxy.plan.counts(),
            "ports": {proxy.protocol: proxy.port},
        }

    def status(self) -> dict[str, Any]:
        return {
            "nodes": {name: self.node_status(name) for name in sorted(self.proxies)},
            "events": self._count,
        }

    def describe(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "inventory": str(self.inventory_path) if self.inventory_path else None,
            "events": str(self.events_path) if self.events_path is not None else None,
            "nodes": {
                name: {
                    "protocols": [p.protocol],
                    "ports": {p.protocol: p.port},
                    "upstream": p.spec.upstream,
                    "proxy": True,
                }
                for name, p in self.proxies.items()
            },
        }

    def inventory(self) -> list[dict[str, Any]]:
        return [inventory_entry(p) for p in self.proxies.values()]


def inventory_entry(proxy: Proxy, resource_class: str = "baremetal") -> dict[str, Any]:
    """The proxied node in bmaas's inventory format: the proxy's address,
    the upstream BMC's credentials."""
    spec = proxy.spec
    info: dict[str, Any] = {}
    if spec.protocol == "ipmi":
        info.update(ipmi_address=spec.listen_host, ipmi_port=proxy.port)
        if spec.username:
            info["ipmi_username"] = spec.username
        if spec.password:
            info["ipmi_password"] = spec.password.reveal()
    else:
        assert isinstance(proxy, RedfishProxy)
        info["redfish_address"] = proxy.url
        if spec.username:
            info["redfish_username"] = spec.username
        if spec.password:
            info["redfish_password"] = spec.password.reveal()
        if spec.serves_tls:
            info["redfish_verify_ca"] = str(proxy.cert_path)
    return {
        "name": spec.node,
        "driver": spec.protocol,
        "driver_info": info,
        "resource_class": resource_class,
        "properties": {"proxy_upstream": spec.upstream},
    }
