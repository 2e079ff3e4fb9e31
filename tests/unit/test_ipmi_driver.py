"""IPMIDriver without a BMC: driver_info, identity, capabilities and reply parsing."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from bmaas.driver import BootDevice, BootSetting, Capability
from bmaas.driver_info import DriverInfo
from bmaas.drivers.ipmi import IPMIDriver
from bmaas.drivers.ipmi.driver import ChassisStatus
from bmaas.faults import InputError, UnsupportedOperation
from bmaas.hwlab.ipmi.fru import build_fru
from bmaas.registry import build_driver, load_driver
from tests.budgets import per_call


def _driver(**raw: Any) -> IPMIDriver:
    info = {"ipmi_address": "10.0.0.4", "ipmi_password": "s3cret-pw", **raw}
    driver = build_driver("r1-n04", "ipmi", info)
    assert isinstance(driver, IPMIDriver)
    return driver


class _Stub:
    """A BoundedCommand stand-in: canned replies per (netfn, command)."""

    def __init__(self, replies: dict[tuple[int, int], Any]) -> None:
        self.replies = replies
        self.sent: list[tuple[int, int, list[int]]] = []

    def raw_command(self, netfn: int, command: int, data: Any = (), **kw: Any) -> dict[str, Any]:
        self.sent.append((netfn, command, list(data)))
        reply = self.replies[(netfn, command)]
        return reply(list(data)) if callable(reply) else reply

    def xraw_command(self, netfn: int, command: int, data: Any = (), **kw: Any) -> dict[str, Any]:
        return self.raw_command(netfn, command, data)


def test_registered_as_ipmi() -> None:
    assert load_driver("ipmi") is IPMIDriver


def test_driver_info_errors_name_the_key_and_node() -> None:
    with pytest.raises(InputError) as info:
        build_driver("r1-n04", "ipmi", {"ipmi_username": "admin"})
    assert info.value.field == "driver_info.ipmi_address"
    assert info.value.node == "r1-n04"
    with pytest.raises(InputError, match="did you mean 'ipmi_password'"):
        _driver(ipmi_pasword="x")
    with pytest.raises(InputError, match="cipher suite 5"):
        _driver(ipmi_cipher_suite=5)
    # another driver's key is fine: one BMC may speak IPMI and Redfish
    assert _driver(redfish_address="https://x").info.redfish_address == "https://x"
    with pytest.raises(InputError):
        IPMIDriver("r1-n04", DriverInfo())


def test_identity_never_shows_the_password() -> None:
    driver = _driver(ipmi_port=6230)
    assert driver.address == "10.0.0.4:6230"
    assert "r1-n04" in repr(driver)
    assert "s3cret-pw" not in repr(driver) + repr(driver.info) + str(driver.info.to_dict())
    assert _driver(ipmi_address="fd00::4").address == "[fd00::4]:623"


def test_capabilities_are_what_ipmi_offers() -> None:
    driver = _driver()
    assert driver.supports(Capability.POWER)
    assert driver.supports(Capability.SOFT_POWER)
    assert driver.supports(Capability.INVENTORY)
    assert not driver.supports(Capability.VIRTUAL_MEDIA)
    with pytest.raises(UnsupportedOperation) as info:
        driver.insert_virtual_media(
            "http://img/x.iso", deadline=per_call(driver)
        )  # no BMC needed to say no
    assert info.value.node == "r1-n04"
    driver.close()
    driver.close()


def test_chassis_status_bits() -> None:
    status = ChassisStatus.decode(bytes([0b0001_1001, 0, 0]))
    assert status.power_on
    assert status.power_fault
    assert status.control_fault
    assert not status.overload
    with pytest.raises(struct.error):
        ChassisStatus.decode(b"")


@pytest.mark.parametrize(
    ("flags", "selector", "expected"),
    [
        (0x80, 1 << 2, BootSetting(BootDevice.PXE, persistent=False)),
        (0xC0, 2 << 2, BootSetting(BootDevice.DISK, persistent=True)),
        (0xC0, 8 << 2, BootSetting(BootDevice.CDROM, persistent=True)),  # remote CD
        (0x80, 6 << 2, BootSetting(BootDevice.BIOS, persistent=False)),
        (0x00, 1 << 2, BootSetting(BootDevice.DISK, persistent=True)),  # no override set
    ],
)
def test_boot_flags_decode(flags: int, selector: int, expected: BootSetting) -> None:
    stub = _Stub({(0, 9): {"code": 0, "data": bytes([1, 5, flags, selector, 0, 0, 0])}})
    assert _driver()._read_boot(stub) == expected  # type: ignore[arg-type]
    assert stub.sent == [(0, 9, [5, 0, 0])]


def test_boot_flags_that_bmaas_cannot_express_or_parse() -> None:
    floppy = _Stub({(0, 9): {"code": 0, "data": bytes([1, 5, 0x80, 0xF << 2, 0, 0, 0])}})
    with pytest.raises(UnsupportedOperation):
        _driver()._read_boot(floppy)  # type: ignore[arg-type]
    other = _Stub({(0, 9): {"code": 0, "data": bytes([1, 4, 0x80, 4])}})
    with pytest.raises(struct.error):
        _driver()._read_boot(other)  # type: ignore[arg-type]


def test_fru_read_backs_off_when_the_bmc_wants_smaller_chunks() -> None:
    image = build_fru(manufacturer="Acme", model="R640", serial="SN-1")

    def read(data: list[int]) -> dict[str, Any]:
        _, lo, hi, count = data
        if count > 32:
            return {
                "code": 0xCA,
                "data": b"",
                "error": "Cannot return number of requested data bytes",
            }
        chunk = image[lo | hi << 8 :][:count]
        return {"code": 0, "data": bytes([len(chunk)]) + chunk}

    stub = _Stub(
        {(0x0A, 0x10): {"code": 0, "data": struct.pack("<HB", len(image), 0)}, (0x0A, 0x11): read}
    )
    assert IPMIDriver._read_fru(stub) == image  # type: ignore[arg-type]
    sizes = [data[3] for _, command, data in stub.sent if command == 0x11]
    assert sizes[0] == len(image)  # asked for all of it, was told 0xCA
    assert all(size <= 32 for size in sizes[-3:])  # then halved until the BMC agreed


def test_fru_read_is_bounded_when_the_bmc_returns_nothing() -> None:
    stub = _Stub(
        {
            (0x0A, 0x10): {"code": 0, "data": struct.pack("<HB", 4096, 0)},
            (0x0A, 0x11): {"code": 0, "data": bytes([0])},
        }
    )
    assert IPMIDriver._read_fru(stub) == b""  # type: ignore[arg-type]
    assert len(stub.sent) == 2
