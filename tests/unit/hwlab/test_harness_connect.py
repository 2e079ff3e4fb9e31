"""The harness's Ironic connection sends a request again when the API closed
its connection unanswered (cheroot's keep-alive expiry, which a loaded runner
runs late): the observer's connection is not what a test measures."""

from __future__ import annotations

import inspect
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import openstack.proxy
import pytest
from keystoneauth1 import exceptions as ks_exc

from bmaas.hwlab.harness.ironic import OBSERVER_CONNECT_RETRIES, connect
from tests.httpserve import ironic_versions, send_json, serving_handler

pytestmark = [
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK50Warning"),
    pytest.mark.filterwarnings("ignore::openstack.warnings.RemovedInSDK60Warning"),
]


def _api(closes: int) -> tuple[type[BaseHTTPRequestHandler], list[str]]:
    """An Ironic API stand-in that closes the first ``closes`` node reads
    unanswered (version discovery is answered), and the node reads it saw."""
    node_reads: list[str] = []

    class Api(BaseHTTPRequestHandler):
        left: ClassVar[int] = closes

        def do_GET(self) -> None:
            if "/nodes/" not in self.path:
                send_json(self, 200, ironic_versions(self.headers["Host"]))
                return
            node_reads.append(self.path)
            if Api.left:
                Api.left -= 1
                self.close_connection = True  # closed without an answer
                return
            send_json(self, 200, {"uuid": "n-1", "name": "node-001"})

        def log_message(self, *_args: Any) -> None:
            pass

    return Api, node_reads


def test_a_read_the_api_closed_unanswered_is_sent_again(keystoneauth_sleeps: list[float]) -> None:
    api, node_reads = _api(closes=1)
    with serving_handler(api) as url:
        node = connect(url).baremetal.get_node("n-1")
    assert node.name == "node-001"
    assert node_reads == ["/v1/nodes/n-1"] * 2
    assert keystoneauth_sleeps == [0.5]


def test_an_api_that_keeps_closing_ends_in_connect_failure(
    keystoneauth_sleeps: list[float],
) -> None:
    api, node_reads = _api(closes=OBSERVER_CONNECT_RETRIES + 1)
    with serving_handler(api) as url, pytest.raises(ks_exc.ConnectFailure):
        connect(url).baremetal.get_node("n-1")
    retries = _retries_per_request()
    assert len(node_reads) == retries + 1
    assert keystoneauth_sleeps == [0.5, 1.0, 2.0][:retries]


def _retries_per_request() -> int:
    """openstacksdk 4.1.0 (the floor) gives each proxy request
    ``connect_retries=1`` of its own, over the connection's setting; 4.22.0
    (the newest tested) leaves it None, and the connection's applies."""
    own = inspect.signature(openstack.proxy.Proxy.request).parameters["connect_retries"].default
    return OBSERVER_CONNECT_RETRIES if own is None else int(own)
