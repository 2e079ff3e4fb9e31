"""Where bmaas finds a BIOS attribute registry (``lifecycle.registry_location``).

A registry file's own name need not be the registry's: stock sushy-tools
serves ``/redfish/v1/Registries/BiosAttributeRegistry.v1_0_0`` whose
``Location`` is the registry ``BiosAttributeRegistryP89.v1_0_0``, the name
its BIOS gives (issue 51: against it, ``bmaas bios set`` sent a value the
registry does not allow, unchecked). sushy matches the registry's own
``Id``; so does bmaas, once the files' names have not matched."""

from __future__ import annotations

from typing import Any

from bmaas.drivers.redfish.lifecycle import registry_location
from bmaas.drivers.redfish.preconditions import Resource

ROOT = {"Registries": {"@odata.id": "/redfish/v1/Registries"}}
NAME = "BiosAttributeRegistryP89.v1_0_0"


def reader(tree: dict[str, dict[str, Any]], seen: list[str]) -> Any:
    def read(path: str) -> Resource:
        seen.append(path)
        return Resource(path, tree[path])

    return read


def sushy_tools_tree() -> dict[str, dict[str, Any]]:
    """As sushy-tools 2.2.0 serves it (its templates)."""
    return {
        "/redfish/v1/Registries": {
            "Members": [
                {"@odata.id": "/redfish/v1/Registries/Messages"},
                {"@odata.id": "/redfish/v1/Registries/BiosAttributeRegistry.v1_0_0"},
            ]
        },
        "/redfish/v1/Registries/Messages": {
            "Id": "Messages",
            "Location": [{"Language": "en", "Uri": "/redfish/v1/Registries/Messages/Registry"}],
        },
        "/redfish/v1/Registries/Messages/Registry": {"Id": "Messages", "Messages": {}},
        "/redfish/v1/Registries/BiosAttributeRegistry.v1_0_0": {
            "Id": "BiosAttributeRegistry.v1_0_0",
            "Registry": "BiosAttributeRegistry1.0",
            "Location": [{"Language": "en", "Uri": "/redfish/v1/Systems/Bios/BiosRegistry"}],
        },
        "/redfish/v1/Systems/Bios/BiosRegistry": {
            "Id": NAME,
            "RegistryEntries": {"Attributes": []},
        },
    }


def test_a_registry_found_by_its_own_id_when_no_file_is_named_after_it() -> None:
    seen: list[str] = []
    assert registry_location(reader(sushy_tools_tree(), seen), ROOT, NAME) == (
        "/redfish/v1/Systems/Bios/BiosRegistry"
    )


def test_a_file_named_after_the_registry_is_taken_without_reading_the_others() -> None:
    tree = sushy_tools_tree()
    tree["/redfish/v1/Registries"]["Members"].append(
        {"@odata.id": f"/redfish/v1/Registries/{NAME}"}
    )
    tree[f"/redfish/v1/Registries/{NAME}"] = {
        "Id": NAME,
        "Location": [{"Language": "en", "Uri": "/registries/p89.json"}],
    }
    seen: list[str] = []
    assert registry_location(reader(tree, seen), ROOT, NAME) == "/registries/p89.json"
    assert seen == ["/redfish/v1/Registries", f"/redfish/v1/Registries/{NAME}"]


def test_no_registry_of_that_id_is_none() -> None:
    seen: list[str] = []
    assert registry_location(reader(sushy_tools_tree(), seen), ROOT, "OtherRegistry.v1_0_0") is None
