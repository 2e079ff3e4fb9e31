"""Enroll thousands of nodes into a stopped Ironic's database, as its conductor would.

``python -m bmaas.hwlab.harness.ironic_bulk --config-file ironic.conf < nodes.json``,
run with the Ironic venv's interpreter (it imports ``ironic``). Through the
REST API a node costs a create and a ``manage`` (a verify task: one BMC
read), about 4 nodes a second on a 2-core machine -- 40 minutes for the
10,000 nodes of ``hwlab bench ironic-scale``, most of it the API's and the
verify's cost, which the benchmark does not measure. Here each node goes
through the conductor's own steps for ``create_node``
(``driver_factory.check_and_update_node_interfaces``, then
``Node.create()``), already ``manageable``: what the API path reaches,
minus the verify's one power read: the power state it would have recorded
is written with the node (``power_state``, default ``power off``, as every
lab machine starts).

stdin: a JSON list of ``{"name", "driver", "driver_info"}``; stdout: one JSON
line per node, ``{"name", "uuid"}``. Exit 2 on bad input, with the reason.
"""

from __future__ import annotations

import json
import sys
import uuid as uuidlib
from collections.abc import Sequence
from typing import Any


def enroll(config_file: str, nodes: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """Create ``nodes`` (manageable) in the database ``config_file`` names."""
    from ironic import objects
    from ironic.common import context as ironic_context
    from ironic.common import driver_factory, states
    from ironic.conf import CONF

    CONF(["--config-file", config_file], project="ironic")
    objects.register_all()
    ctx = ironic_context.get_admin_context()
    out = []
    for spec in nodes:
        node = objects.Node(
            ctx,
            uuid=str(uuidlib.uuid4()),
            name=spec["name"],
            driver=spec["driver"],
            driver_info=spec["driver_info"],
            resource_class=spec.get("resource_class", "baremetal"),
            provision_state=states.MANAGEABLE,
            # what the verify's read would have recorded (every lab machine
            # starts off): the first sync pass is then an ordinary one, not
            # 10,000 "no previous power state" writes
            power_state=spec.get("power_state", states.POWER_OFF),
        )
        driver_factory.check_and_update_node_interfaces(node)
        node.create()
        out.append({"name": spec["name"], "uuid": node.uuid})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "--config-file":
        print(
            "usage: python -m bmaas.hwlab.harness.ironic_bulk --config-file FILE < nodes.json",
            file=sys.stderr,
        )
        return 2
    try:
        nodes = json.load(sys.stdin)
    except ValueError as exc:
        print(f"error: stdin is not JSON: {exc}", file=sys.stderr)
        return 2
    for row in enroll(args[1], nodes):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
