"""bmaas.hwlab.ipmi pieces that need no socket: cipher-suite negotiation and the FRU image."""

from __future__ import annotations

import pytest
from pyghmi.ipmi import fru as pyghmi_fru

from bmaas.hwlab.ipmi.fru import build_fru
from bmaas.hwlab.ipmi.session import CIPHER_SUITES, negotiate


def _proposal(auth: int, integrity: int, confidentiality: int = 1) -> bytes:
    algorithms = [(0, auth), (1, integrity), (2, confidentiality)]
    return bytes(8) + b"".join(bytes([kind, 0, 0, 8, alg, 0, 0, 0]) for kind, alg in algorithms)


@pytest.mark.parametrize(
    ("proposal", "offered", "expected"),
    [
        (_proposal(3, 4), (17, 3), 17),  # pyghmi's and ipmitool's first choice
        (_proposal(1, 1), (17, 3), 3),
        (_proposal(3, 4), (3,), None),  # a BMC without SHA256 must refuse, not downgrade
        (_proposal(1, 1, 0), (17, 3), None),  # no confidentiality: not offered
        (
            bytes(8) + bytes([0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0]),
            (3,),
            3,
        ),  # "BMC picks"
    ],
)
def test_negotiation(proposal: bytes, offered: tuple[int, ...], expected: int | None) -> None:
    suite = negotiate(proposal, offered)
    assert (suite.number if suite else None) == expected


def test_cipher_suite_records_match_the_spec() -> None:
    assert CIPHER_SUITES[3].record() == bytes([0xC0, 3, 0x01, 0x41, 0x81])
    assert CIPHER_SUITES[17].record() == bytes([0xC0, 17, 0x03, 0x44, 0x81])


def test_fru_image_parses_and_checksums() -> None:
    image = build_fru(manufacturer="Acme", model="R640", serial="SN-1")
    assert sum(image[:8]) % 256 == 0  # common header
    for offset_units in image[2:5]:
        start = offset_units * 8
        length = image[start + 1] * 8
        assert sum(image[start : start + length]) % 256 == 0  # each area
    info = pyghmi_fru.FRU(rawdata=image).info
    assert info["Manufacturer"] == "Acme"
    assert info["Product name"] == "R640"
    assert info["Serial Number"] == "SN-1"
    assert info["Board serial number"] == "SN-1"
    assert info["Chassis type"] == "Rack Mount Chassis"


def test_fru_fields_are_cut_to_63_bytes() -> None:
    info = pyghmi_fru.FRU(rawdata=build_fru(manufacturer="M" * 80, model="x", serial="")).info
    assert info["Manufacturer"] == "M" * 63
    assert info["Serial Number"] is None
