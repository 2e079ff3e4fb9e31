"""The pure rules the Redfish driver applies to what a service allows
(``drivers/redfish/boot.py`` and ``power.py``), on values vendors publish."""

from __future__ import annotations

from typing import Any

import pytest

from bmaas.driver import BootDevice, BootSetting, OtherBootDevice, PowerAction
from bmaas.drivers.redfish import boot, power

XCC = {"BootSourceOverrideEnabled@Redfish.AllowableValues": ["Once", "Disabled"]}


@pytest.mark.parametrize(
    ("shown", "persistent", "sent"),
    [
        ({}, True, "Continuous"),  # no list: assumed allowed (sushy's rule)
        ({}, False, "Once"),
        (XCC, True, "Once"),  # Lenovo XCC
        ({"BootSourceOverrideEnabled@Redfish.AllowableValues": ["Once", "Continuous"]}, True,
         "Continuous"),
    ],
)  # fmt: skip
def test_frequency_by_what_the_service_allows(
    shown: dict[str, Any], persistent: bool, sent: str
) -> None:
    assert boot.frequency(shown, persistent) == sent


@pytest.mark.parametrize(
    ("shown", "reads"),
    [
        ({"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "Pxe"},
         BootSetting(BootDevice.DISK, True)),
        ({"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "None"},
         BootSetting(BootDevice.DISK, True)),
        ({"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "UsbCd"},
         BootSetting(BootDevice.CDROM, True)),
        ({"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Utilities"},
         BootSetting(OtherBootDevice("Utilities"), False)),
    ],
)  # fmt: skip
def test_an_override_reads_as_what_it_is(shown: dict[str, Any], reads: BootSetting) -> None:
    assert boot.setting_of(shown) == reads


def test_a_read_back_keeping_the_sent_target_with_disabled_reads_as_once() -> None:
    h13 = {"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "Pxe"}
    assert boot.setting_of(h13, just_sent="Pxe") == BootSetting(BootDevice.PXE, False)
    assert boot.setting_of(h13, just_sent="Hdd") == BootSetting(BootDevice.DISK, True)


def test_the_override_body_honours_targets_and_modes() -> None:
    system = {
        "Manufacturer": "Supermicro",
        "Boot": {
            "BootSourceOverrideTarget@Redfish.AllowableValues": ["Pxe", "Hdd", "UsbCd"],
            "BootSourceOverrideMode": "Legacy",
        },
    }
    assert boot.override(system, BootDevice.CDROM, False, "uefi") == {
        "BootSourceOverrideTarget": "UsbCd",
        "BootSourceOverrideEnabled": "Once",
        "BootSourceOverrideMode": "UEFI",
    }
    with pytest.raises(boot.NotAllowed, match="BiosSetup"):
        boot.override(system, BootDevice.BIOS, False, None)
    # no BootSourceOverrideMode on the system: no mode sent
    assert "BootSourceOverrideMode" not in boot.override(
        {"Boot": {}}, BootDevice.PXE, False, "bios"
    )


@pytest.mark.parametrize(
    ("listed", "action", "sent"),
    [
        (["On", "ForceOff", "GracefulShutdownGracefulRestart"], PowerAction.SOFT_REBOOT,
         "GracefulRestart"),  # Supermicro X13's fused value
        (["On", "ForceOff", "PushPowerButton"], PowerAction.SOFT_OFF, "PushPowerButton"),  # iLO 5
        (["On", "ForceOff", "GracefulShutdown", "PushPowerButton"], PowerAction.SOFT_OFF,
         "GracefulShutdown"),
        (["ForceOn", "ForceOff"], PowerAction.ON, "ForceOn"),
        (["On", "ForceOff", "GracefulShutdown"], PowerAction.SOFT_REBOOT, None),  # R630
        (None, PowerAction.REBOOT, "ForceRestart"),  # lists nothing: every one
    ],
)  # fmt: skip
def test_the_reset_type_by_what_the_system_offers(
    listed: list[str] | None, action: PowerAction, sent: str | None
) -> None:
    assert power.choose(action, power.offered(listed)) == sent


def test_reset_types_from_an_action_info() -> None:
    info = {"Parameters": [{"Name": "ResetType", "AllowableValues": ["On", "ForceOff"]}]}
    assert power.from_action_info(info) == ["On", "ForceOff"]
    assert power.from_action_info({"Parameters": []}) is None


def test_uefi_http_boot_is_sent_with_its_uri_where_the_service_lists_it() -> None:
    """Ironic's redfish-https asks for ``UefiHttp`` and ``HttpBootUri``; a
    service that does not list ``UefiHttp`` (or lists no targets at all) is
    refused before anything is sent."""
    system = {
        "Boot": {
            "BootSourceOverrideTarget@Redfish.AllowableValues": ["Pxe", "Hdd", "UefiHttp"],
            "BootSourceOverrideEnabled@Redfish.AllowableValues": ["Once", "Disabled"],
        }
    }
    assert boot.override(system, boot.HttpBoot("https://c/boot.iso"), True, None) == {
        "BootSourceOverrideTarget": "UefiHttp",
        "BootSourceOverrideEnabled": "Once",  # no Continuous here (XCC-like)
        "HttpBootUri": "https://c/boot.iso",
    }
    # no URI: the one DHCP hands out, none sent
    assert "HttpBootUri" not in boot.override(system, boot.HttpBoot(None), False, None)
    for refusing in (
        {"Boot": {}},
        {"Boot": {"BootSourceOverrideTarget@Redfish.AllowableValues": ["Pxe"]}},
    ):
        with pytest.raises(boot.NotAllowed, match="UefiHttp"):
            boot.override(refusing, boot.HttpBoot("https://c/boot.iso"), False, None)
    shown = {"BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideTarget": "UefiHttp"}
    assert boot.setting_of(shown) == BootSetting(OtherBootDevice("UefiHttp"), True)
    assert boot.HttpBoot("x").device == OtherBootDevice("UefiHttp")


def test_a_read_back_with_another_http_boot_uri_is_a_boot_failure() -> None:
    from bmaas.driver_info import DriverInfo
    from bmaas.drivers.redfish.driver import RedfishDriver
    from bmaas.faults import BootFailure

    info = DriverInfo.parse(
        {
            "redfish_address": "https://bmc.example",
            "redfish_username": "u",
            "redfish_password": "p",
        },
        required=RedfishDriver.required_info,
    )
    driver = RedfishDriver("n1", info)
    sent = "https://conductor/redfish/boot-1.iso?token=secret"
    driver._check_http_uri(sent, {"HttpBootUri": sent})
    driver._check_http_uri(sent, {})  # a service that does not show the property
    for shown in ("https://conductor/other.iso", None):
        with pytest.raises(BootFailure) as failed:
            driver._check_http_uri(sent, {"HttpBootUri": shown})
        assert "secret" not in str(failed.value)  # a URL may carry credentials
    driver.close()


# -- issue 47: what a service does not say ----------------------------------------------------


def test_a_reboot_is_composed_only_where_off_and_on_exist() -> None:
    assert power.composed(PowerAction.REBOOT, {"On", "ForceOff"}) == ("ForceOff", "On")
    assert power.composed(PowerAction.REBOOT, {"ForceOn", "ForceOff"}) == ("ForceOff", "ForceOn")
    assert power.composed(PowerAction.REBOOT, {"On", "GracefulShutdown"}) is None
    assert power.composed(PowerAction.SOFT_REBOOT, {"On", "ForceOff"}) is None


def test_a_boot_without_override_properties_is_refused_an_empty_one_is_not() -> None:
    only_order = {"Boot": {"BootOrder": ["Boot0001"], "BootOptions": {"@odata.id": "/x"}}}
    with pytest.raises(boot.NotAllowed, match="no boot override"):
        boot.override(only_order, BootDevice.PXE, False, None)
    assert boot.override({"Boot": {}}, BootDevice.PXE, False, None)["BootSourceOverrideTarget"]
    assert boot.override({}, BootDevice.PXE, False, None)["BootSourceOverrideTarget"] == "Pxe"


@pytest.mark.parametrize(
    ("slot", "is_cd"),
    [
        ({"Id": "CD1", "Name": "Virtual Media"}, True),  # AMI: no MediaTypes
        ({"Id": "1", "Name": "Virtual CD"}, True),
        ({"Id": "VirtualCD"}, True),
        ({"Id": "cdrom0"}, True),
        ({"Id": "Floppy1", "Name": "Virtual Floppy"}, False),
        ({"Id": "2", "Name": "VirtualMedia"}, False),
        ({"Id": "CD", "MediaTypes": ["Floppy", "USBStick"]}, False),  # the list decides
        ({"Id": "2", "MediaTypes": ["DVD"]}, True),
        (
            {
                "Id": "2",
                "Actions": {
                    "#VirtualMedia.InsertMedia": {
                        "target": "/x",
                        "MediaType@Redfish.AllowableValues": ["CD", "USBStick"],
                    }
                },
            },
            True,
        ),
    ],
)
def test_what_makes_a_slot_a_cd_slot(slot: dict[str, Any], is_cd: bool) -> None:
    from bmaas.drivers.redfish.vmedia import is_cd_slot

    assert is_cd_slot(None, slot) is is_cd  # type: ignore[arg-type]  # no read needed


def test_a_slot_holds_an_image_whatever_credentials_the_bmc_shows() -> None:
    from bmaas.drivers.redfish.preconditions import Resource
    from bmaas.drivers.redfish.vmedia import Slot

    def slot(**body: Any) -> Slot:
        return Slot(Resource("/s", {"Inserted": True, **body}))

    url = "http://user:pw@images.example/deploy.iso"
    assert slot(Image="http://images.example/deploy.iso").holds(url)
    assert not slot(Image="http://images.example/other.iso").holds(url)
    assert slot(ImageName="deploy.iso").holds(url)  # no Image shown
    assert not slot(Image="http://images.example/deploy.iso", Inserted=False).holds(url)
    # an upload (DMTF's CD2): not a URL bmaas inserted
    assert not slot(Image="/redfish/v1/UpdateService/LocalImageStore/49").holds(url)


class _Answer:
    def __init__(self, status: int) -> None:
        self.status_code = status

    def json(self) -> dict[str, Any]:
        return {"error": {"code": "Base.1.8.GeneralError", "message": "no"}}


class _ActionInfoAnswers:
    """A connector whose every GET (the ActionInfo) answers ``status``."""

    def __init__(self, status: int) -> None:
        self.status, self.gets = status, 0

    def get(self, path: str) -> Any:
        import sushy.exceptions as sushy_exc

        self.gets += 1
        sushy_exc.raise_for_response("GET", path, _Answer(self.status))
        raise AssertionError(f"{self.status} raised nothing")


_SLOT_WITH_INFO = {
    "Id": "2",
    "Actions": {"#VirtualMedia.InsertMedia": {"target": "/x", "@Redfish.ActionInfo": "/info"}},
}


@pytest.mark.parametrize("status", [404, 400, 405, 501, 428])
def test_an_action_info_the_bmc_has_not_says_no_cd(status: int) -> None:
    from bmaas.drivers.redfish.vmedia import is_cd_slot

    conn = _ActionInfoAnswers(status)
    assert is_cd_slot(conn, _SLOT_WITH_INFO) is False  # type: ignore[arg-type]
    assert conn.gets == 1


@pytest.mark.parametrize("status", [503, 500, 429, 401, 403, 408, 409, 507])
def test_a_busy_or_refusing_action_info_read_is_a_fault_not_no_cd(status: int) -> None:
    """A busy BMC's answer is not "this slot takes no CD": found once per
    driver, that "no" refused virtual media for the driver's life."""
    import sushy.exceptions as sushy_exc

    from bmaas.drivers.redfish.vmedia import is_cd_slot

    with pytest.raises(sushy_exc.HTTPError) as raised:
        is_cd_slot(_ActionInfoAnswers(status), _SLOT_WITH_INFO)  # type: ignore[arg-type]
    assert raised.value.status_code == status
