"""UEFI HTTP boot where the service offers it, refused where it does not,
and a service's refusal typed by what it says (issue 48, finding 4).

``check_http_boot`` is what ``bmaas-https`` asks at Ironic's validate (one
GET, nothing written); ``set_http_boot`` the boot step. Recorded trees
(:mod:`tests.lab.test_redfish_vendor_trees`) for the vendors' shapes, and
stock sushy-tools (its fake driver): a 400 on the ``UefiHttp`` PATCH is
never an ``UnclassifiedFault`` and never counted toward fencing.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bmaas.deadline import Deadline
from bmaas.driver import BootDevice
from bmaas.faults import InputError, UnclassifiedFault, UnsupportedOperation
from bmaas.policy import policy_for
from bmaas.registry import build_driver
from tests.lab.redfish_trees import Quirks
from tests.lab.test_redfish_vendor_trees import call, fails, tree
from tests.sushy_emulator import sushy_emulator

pytestmark = pytest.mark.lab

#: lists UefiHttp among its targets (HPE iLO 5); Lenovo XCC does not
OFFERS = "hpe-dl325-gen10plus"
LACKS = "lenovo-sr650"
ISO = "http://10.0.0.1:8080/redfish/boot-1.iso"


def test_a_system_listing_uefihttp_passes_the_check_with_one_get_and_nothing_written() -> None:
    with tree(OFFERS) as (state, driver):
        driver.check_http_boot(deadline=call())
        before = len(state.calls("GET"))
        driver.check_http_boot(deadline=call())
        assert len(state.calls("GET")) - before == 1
        assert not state.writes()


def test_a_system_without_uefihttp_is_refused_by_the_check_and_the_boot_step_alike() -> None:
    with tree(LACKS) as (state, driver):
        checked = fails(lambda: driver.check_http_boot(deadline=call()))
        booted = fails(lambda: driver.set_http_boot(ISO, deadline=call()))
        assert not state.writes()
    for fault in (checked, booted):
        assert isinstance(fault, UnsupportedOperation), fault
        assert "UefiHttp is not one the system allows" in str(fault)
        assert str(fault.retry) == "other_node"  # another node may boot so


@pytest.mark.parametrize(
    ("message_id", "words"),
    [
        # the Base registry's answer to a target value it does not take
        ("Base.1.16.PropertyValueNotInList", "PropertyValueNotInList"),
        # an answer no rule names: still the service's refusal, never unclassified
        ("Base.1.16.GeneralError", "the service refused UEFI HTTP boot"),
    ],
)
def test_a_400_on_the_uefihttp_patch_is_unsupported_never_counted(
    message_id: str, words: str
) -> None:
    with tree(OFFERS, Quirks(refuse_system_patch=(400, message_id))) as (state, driver):
        fault = fails(lambda: driver.set_http_boot(ISO, deadline=call()))
        assert [m for m, _, _ in state.writes()] == ["PATCH"]
    assert isinstance(fault, UnsupportedOperation), fault
    assert words in str(fault)
    assert fault.status == "400"


def test_a_400_on_another_override_keeps_its_mapping() -> None:
    """The UefiHttp fallback is the UEFI HTTP boot PATCH's alone: a plain
    override refused with an answer no rule names stays what the table says."""
    refusal = Quirks(refuse_system_patch=(400, "Base.1.16.GeneralError"))
    with tree(OFFERS, refusal) as (_, driver), pytest.raises(UnclassifiedFault):
        driver.set_boot_device(BootDevice.PXE, deadline=call())


# -- stock sushy-tools ------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """An ISO on a loopback web server (sushy-tools downloads the URI it is sent)."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "boot.iso").write_bytes(b"bmaas lab boot iso\n" * 64)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(120)
def test_stock_sushy_tools_uefi_http_boot_is_typed_by_what_it_says(
    tmp_path: Path, served: str
) -> None:
    """sushy-tools' fake driver: a Legacy system lists no UefiHttp (refused
    at the check, nothing sent); a UEFI one lists it but cannot keep an
    HttpBootUri (400 "Failed to save HttpBootUri field value.": unsupported,
    never counted), and an image it cannot download is the URL's fault."""
    with sushy_emulator(tmp_path / "emulator", 2, boot_modes=("Legacy", "UEFI")) as emulator:
        legacy, uefi = (
            build_driver(
                f"st-{i}",
                "redfish",
                {
                    "redfish_address": emulator.url,
                    "redfish_system_id": system,
                    "redfish_username": "admin",
                    "redfish_password": "password",
                },
                bmc_timeout=10.0,
            )
            for i, system in enumerate(emulator.systems)
        )
        try:
            refused = fails(lambda: legacy.check_http_boot(deadline=Deadline.after(20)))
            assert isinstance(refused, UnsupportedOperation), refused
            assert "(Pxe, Cd, Hdd)" in str(refused)
            uefi.check_http_boot(deadline=Deadline.after(20))
            kept = fails(
                lambda: uefi.set_http_boot(f"{served}/boot.iso", deadline=Deadline.after(20))
            )
            assert isinstance(kept, UnsupportedOperation), kept
            assert "Failed to save HttpBootUri field value" in str(kept)
            missing = fails(
                lambda: uefi.set_http_boot(f"{served}/gone.iso", deadline=Deadline.after(20))
            )
            assert isinstance(missing, InputError), missing
            assert "Failed to download and attach HttpBootUri" in str(missing)
            assert not policy_for(InputError).counts_for_health
        finally:
            legacy.close()
            uefi.close()
