"""The same provisioning code against bmaas's embedded backend and Ironic.

Run it against the embedded backend (bmaas's store and drivers)::

    python docs/examples/provision_both.py

or against the Ironic of a cloud in clouds.yaml::

    python docs/examples/provision_both.py --cloud lab

CI runs :func:`deploy_web` on both (tests/unit/ironic_backend/test_example.py,
tests/ironic/test_backend_ironic.py); the README's Provisioning section
includes it.
"""

from __future__ import annotations

import argparse

from bmaas.provision import Provisioner, ProvisionFailed, Request


def deploy_web(
    provisioner: Provisioner, *, count: int = 2, prefix: str = "web", network: str | None = None
) -> dict[str, str]:
    """Deploy ``count`` instances; return {instance: node}. Every node that
    failed on the way is printed with its typed fault; a request that found
    no working node prints every attempt."""
    requests = [
        Request(f"{prefix}-{i}", resource_class="baremetal", network=network) for i in range(count)
    ]
    placed = {}
    for result in provisioner.provision_many(requests, workers=count):
        if isinstance(result, ProvisionFailed):
            print(result)
            continue
        for attempt in result.attempts:
            print(f"{result.request}: {attempt}")
        placed[result.instance] = result.node
    return placed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cloud", help="an Ironic cloud from clouds.yaml (default: embedded)")
    parser.add_argument("--count", type=int, default=2)
    args = parser.parse_args()
    if args.cloud:
        from bmaas.drivers.ironic_backend import from_cloud

        provisioner = Provisioner(backend=from_cloud(args.cloud))
    else:
        from bmaas.ops import driver_factory
        from bmaas.store import Store

        provisioner = Provisioner(Store.open(None), driver_factory=driver_factory())
    with provisioner:
        for instance, node in deploy_web(provisioner, count=args.count).items():
            print(f"{instance} is active on {node}")


if __name__ == "__main__":
    main()
