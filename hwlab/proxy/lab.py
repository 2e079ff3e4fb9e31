"""A lab's proxied nodes: the proxies, and the stock upstreams they ask for.

:class:`bmaas.hwlab.lab.Lab` hands its proxied nodes here. Nodes with ``stock:
vbmc`` share one vbmcd (one BMC per libvirt domain); nodes with ``stock:
sushy`` share one sushy-emulator per libvirt URI (or its fake driver, one
system per node), each node reached through its own proxy port.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bmaas.faults import InputError
from bmaas.hwlab.labspec import NodeSpec
from bmaas.hwlab.proxy.host import ProxyHost, inventory_entry
from bmaas.hwlab.proxy.spec import ProxySpec
from bmaas.hwlab.proxy.stock import StockSushy, StockVbmc

__all__ = ["ProxiedNodes"]

LOG = logging.getLogger(__name__)


class ProxiedNodes:
    """Start, reach and stop the proxied nodes of one lab. Empty is fine."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        *,
        seed: int | str,
        workdir: Path,
        events_path: Path,
    ) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.seed = seed
        self.workdir = workdir
        self.events_path = events_path
        self._host: ProxyHost | None = None
        self._stock: list[StockVbmc | StockSushy] = []
        self._sushy_ids: dict[str, str] = {}

    @property
    def names(self) -> set[str]:
        return set(self.nodes)

    @property
    def host(self) -> ProxyHost:
        if self._host is None:
            raise InputError("the lab's proxies are not running")
        return self._host

    @property
    def endpoints(self) -> dict[str, dict[str, int]]:
        return self._host.endpoints if self._host is not None else {}

    def start(self, *, timeout: float = 60.0) -> None:
        if not self.nodes:
            return
        try:
            specs = self._start_stock(timeout)
            self._host = ProxyHost(
                specs,
                rules={n.name: n.rules for n in self.nodes.values()},
                seed=self.seed,
                events_path=self.events_path,
                tls_dir=self.workdir / "tls",
            )
            self._host.start(timeout=timeout)
        except BaseException:
            self.stop()
            raise

    def _start_stock(self, timeout: float) -> list[ProxySpec]:
        specs = {name: n.proxy for name, n in self.nodes.items() if n.proxy is not None}
        vbmc = {name: s for name, s in specs.items() if s.stock == "vbmc"}
        if vbmc:
            uris = {s.libvirt_uri or "test:///default" for s in vbmc.values()}
            users = {(s.username, s.password.reveal()) for s in vbmc.values()}
            if len(uris) > 1 or len(users) > 1:
                raise InputError("stock vbmc nodes of one lab share one libvirt URI and login")
            domains = {name: s.domain or "test" for name, s in vbmc.items()}
            if len(set(domains.values())) != len(domains):
                raise InputError("each stock vbmc node needs its own libvirt domain")
            (user, password), uri = users.pop(), uris.pop()
            server = StockVbmc(
                self.workdir / "vbmc",
                list(domains.values()),
                libvirt_uri=uri,
                username=user or "admin",
                password=password,
            )
            self._stock.append(server)
            server.start(timeout)
            for name, domain in domains.items():
                specs[name] = specs[name].with_upstream(server.host, server.ports[domain])
        by_uri: dict[str | None, list[str]] = {}
        for name, s in specs.items():
            if s.stock == "sushy":
                by_uri.setdefault(s.libvirt_uri, []).append(name)
        for i, (sushy_uri, names) in enumerate(sorted(by_uri.items(), key=lambda kv: str(kv[0]))):
            systems = [specs[n].domain or n for n in names] if sushy_uri else names
            sushy = StockSushy(self.workdir / f"sushy-{i}", systems, libvirt_uri=sushy_uri)
            self._stock.append(sushy)
            sushy.start(timeout)
            for name, system in zip(names, systems, strict=True):
                specs[name] = specs[name].with_upstream(sushy.host, sushy.port)
                self._sushy_ids[name] = sushy.system_id(system)
        for name, spec in specs.items():
            if spec.stock is not None:
                LOG.info("%s: stock %s upstream at %s", name, spec.stock, spec.upstream)
        return list(specs.values())

    def stop(self, *, timeout: float = 10.0) -> None:
        if self._host is not None:
            self._host.stop(timeout=timeout)
            self._host = None
        for server in reversed(self._stock):
            server.stop(timeout)
        self._stock.clear()

    def inventory_entry(self, node: NodeSpec) -> dict[str, Any]:
        entry = inventory_entry(self.host.proxy(node.name), node.resource_class)
        if node.name in self._sushy_ids:
            entry["driver_info"]["redfish_system_id"] = (
                f"/redfish/v1/Systems/{self._sushy_ids[node.name]}"
            )
        if node.network_segment:
            entry["network_segment"] = node.network_segment
        return entry
