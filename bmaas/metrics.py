"""Prometheus metrics for a long-running ``bmaas sync``.

No BMC tool we know exports faults *by class*; operators ask to alert on
exactly that ("BMCAuthError on any node", "unclassified faults > 0", "more
than 5% of the rack in power failure"). The metrics, their labels and the
alerts they serve (``bmaas_sync_uncounted_reads{reason="auth"}``: rotated
credentials, a node never fenced for it): docs/operator.md, "Power-state
sync and metrics". Served on 127.0.0.1 by default.

Each :class:`SyncMetrics` has its own registry, so tests (and two syncs in
one process) never share counters.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import start_http_server

from bmaas.faults import BmaasError, BMCFault
from bmaas.policy import policy_for

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from bmaas.failover import FailoverRecord
    from bmaas.sync_report import SyncReport

__all__ = ["MetricsServer", "SyncMetrics"]

LOG = logging.getLogger(__name__)

_PASS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class SyncMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.faults = Counter(
            "bmaas_faults",
            "BMC faults seen, by fault code/class, driver and operation",
            ["code", "class", "driver", "operation"],
            registry=r,
        )
        self.pass_seconds = Histogram(
            "bmaas_sync_pass_duration_seconds",
            "Duration of one power-state sync pass over every node",
            buckets=_PASS_BUCKETS,
            registry=r,
        )
        self.last_pass = Gauge(
            "bmaas_sync_last_pass_timestamp_seconds",
            "Unix time the last sync pass finished",
            registry=r,
        )
        self.transitions = Counter(
            "bmaas_sync_transitions",
            "Nodes the sync put into fault (faulted) or took out (recovered)",
            ["change"],
            registry=r,
        )
        self.reclaimed = Counter(
            "bmaas_reclaimed_owners",
            "Owners whose lease expired and whose holdings were reclaimed",
            registry=r,
        )
        self.nodes = Gauge(
            "bmaas_nodes",
            "Nodes by last-seen power state, maintenance flag and fault",
            ["power_state", "maintenance", "fault"],
            registry=r,
        )

        self.uncounted = Gauge(
            "bmaas_sync_uncounted_reads",
            "Nodes whose last-pass read failed with a fault node health does not count",
            ["reason"],
            registry=r,
        )
        self.failovers = Counter(
            "bmaas_protocol_failovers",
            "Calls that fell through to the BMC's other protocol, by protocols, "
            "the first protocol's fault code and the outcome (ok or the other's code)",
            ["first", "other", "code", "outcome"],
            registry=r,
        )

    def observe_failover(self, record: FailoverRecord) -> None:
        """One protocol failover (:mod:`bmaas.failover`): pass this as the
        driver factory's ``on_failover``."""
        self.failovers.labels(
            first=record.first, other=record.other, code=record.fault_code, outcome=record.outcome
        ).inc()

    def observe_fault(self, fault: BmaasError, *, driver: str | None = None) -> None:
        operation = fault.operation if isinstance(fault, BMCFault) else None
        fault_driver = fault.driver if isinstance(fault, BMCFault) else None
        self.faults.labels(
            code=fault.code,
            **{"class": type(fault).__name__},
            driver=fault_driver or driver or "",
            operation=operation or "",
        ).inc()

    def observe_pass(
        self, report: SyncReport, node_counts: list[tuple[str, bool, str | None, int]]
    ) -> None:
        """Record one finished pass and the fleet as it stands after it."""
        uncounted: dict[str, int] = {}
        for result in report.results:
            if result.error is not None:
                self.observe_fault(result.error, driver=result.driver)
                row = policy_for(result.error)
                if not row.counts_for_health:
                    uncounted[row.fleet.value] = uncounted.get(row.fleet.value, 0) + 1
        self.uncounted.clear()
        for reason, count in uncounted.items():
            self.uncounted.labels(reason=reason).set(count)
        for change in report.changes:
            if change.change.value != "none":
                self.transitions.labels(change=change.change.value).inc()
        self.reclaimed.inc(len(report.reclaimed))
        self.pass_seconds.observe(report.duration)
        self.last_pass.set(report.finished_at)
        # Replace the whole gauge: a combination that disappeared must read 0, not linger.
        self.nodes.clear()
        for power_state, maintenance, fault, count in node_counts:
            self.nodes.labels(
                power_state=power_state,
                maintenance=str(maintenance).lower(),
                fault=fault or "",
            ).set(count)

    def render(self) -> bytes:
        """The exposition text, as a scrape would see it."""
        return generate_latest(self.registry)

    def serve(self, port: int, *, addr: str = "127.0.0.1") -> MetricsServer:
        """Serve ``/metrics`` on ``addr:port`` (``port=0``: any free port)."""
        server, thread = start_http_server(port, addr=addr, registry=self.registry)
        handle = MetricsServer(server, thread)
        LOG.info("serving metrics on http://%s:%d/metrics", addr, handle.port)
        return handle


@dataclasses.dataclass
class MetricsServer:
    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving and release the socket; safe to call twice."""
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join(timeout)
        self.server.server_close()
