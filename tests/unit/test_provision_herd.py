"""A herd of parallel requests on the embedded backend: they list the same
best node first, and claim one at a time in the process, so a healthy pool
sees one claim a request and no lost one (``EmbeddedBackend.claim``)."""

from __future__ import annotations

import threading
from typing import Any

from bmaas.deadline import Deadline
from bmaas.provision import Provisioned, Request
from bmaas.store import Store
from tests.unit.test_provision import Rack


def test_a_batch_listing_at_once_claims_once_a_request(store: Store) -> None:
    """Eight requests list their candidates at the same moment (a barrier
    holds each until all have listed: the herd of ``bmaas deploy --count 96
    --workers 96``) and claim eight times: none queues behind another for the
    same first node (before: 8 + 7 + ... + 1 = 36 claims, 28 of them lost)."""
    rack = Rack(store, count=8)
    backend = rack.provisioner.backend
    barrier = threading.Barrier(8, timeout=10)
    listed: set[int] = set()
    claims: list[str] = []
    lock = threading.Lock()
    list_candidates, claim = backend.candidates, store.owners.claim

    def candidates(job: Any, *, exclude: Any, deadline: Any) -> list[str]:
        names = list_candidates(job, exclude=exclude, deadline=deadline)
        with lock:
            first = threading.get_ident() not in listed
            listed.add(threading.get_ident())
        if first:
            barrier.wait()
        return names

    def counted(node: str, *args: Any, **kw: Any) -> Any:
        with lock:
            claims.append(node)
        return claim(node, *args, **kw)

    backend.candidates = candidates  # type: ignore[method-assign]
    store.owners.claim = counted  # type: ignore[method-assign]
    results = rack.provisioner.provision_many(
        [Request(f"r{i}") for i in range(8)], workers=8, deadline=Deadline.after(600.0)
    )
    assert all(isinstance(r, Provisioned) for r in results), results
    assert sorted(claims) == rack.names  # one claim a node, none lost
    assert sorted(r.node for r in results if isinstance(r, Provisioned)) == rack.names
