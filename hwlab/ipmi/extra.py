"""IPMI commands no fault rule names, answered so ipmitool's everyday
commands work against a lab BMC: ``mc info`` (Get Device ID is an operation,
``probe``), ``sdr list`` and ``fru`` (the SDR repository), ``sel info`` and
``sel list`` (System Event Log: empty), ``mc guid``.

A real BMC's SDR repository lists its sensors; a lab machine has none, so
the repository holds one record: the BMC's own Management Controller Device
Locator (ipmitool treats an empty repository as one to rebuild, and fails).
These requests are not evaluated
against the fault plan (no operation names them); a BMC that hangs or
refuses the login never gets this far anyway.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

__all__ = ["ANSWERS", "answer"]


#: a repository's info (IPMI 2.0 tables 33-3 and 31-2): version 1.5 (0x51),
#: the entry count, all space free, no addition or erase yet
def _repository(entries: int) -> bytes:
    return bytes([0x51]) + struct.pack("<H", entries) + b"\xff\xff" + bytes(8)


_NAME = b"hwlab BMC"
#: the one SDR (IPMI 2.0 table 43-7): Management Controller Device Locator,
#: slave address 0x20, channel 0, chassis/FRU/SEL/SDR device, entity 0x06.1
_MC_LOCATOR_BODY = bytes([0x20, 0, 0, 0x8E, 0, 0, 0, 0x06, 0x01, 0, 0xC0 | len(_NAME)]) + _NAME
_SDR_RECORD = struct.pack("<HBBB", 1, 0x51, 0x12, len(_MC_LOCATOR_BODY)) + _MC_LOCATOR_BODY
_LAST_RECORD = 0xFFFF
#: SDR: "modal/non-modal update not specified", Reserve supported (bit 1)
_SDR_SUPPORT = 0x02
#: SEL: Reserve supported (bit 1)
_SEL_SUPPORT = 0x02
_COMPLETION_NOT_PRESENT = 0xCB

Answer = Callable[[bytes, str], tuple[int, bytes]]


def _sdr_info(data: bytes, name: str) -> tuple[int, bytes]:
    return 0, _repository(1) + bytes([_SDR_SUPPORT])


def _sel_info(data: bytes, name: str) -> tuple[int, bytes]:
    return 0, _repository(0) + bytes([_SEL_SUPPORT])


def _get_sdr(data: bytes, name: str) -> tuple[int, bytes]:
    """Reservation (2), record id (2: 0 = first), offset (1), count (1)."""
    if len(data) < 6:
        return 0xC7, b""  # request data length invalid
    record, offset, count = struct.unpack_from("<H", data, 2)[0], data[4], data[5]
    if record not in (0, 1):
        return _COMPLETION_NOT_PRESENT, b""
    return 0, struct.pack("<H", _LAST_RECORD) + _SDR_RECORD[offset : offset + count]


def _reserve(data: bytes, name: str) -> tuple[int, bytes]:
    return 0, struct.pack("<H", 1)


def _not_present(data: bytes, name: str) -> tuple[int, bytes]:
    return _COMPLETION_NOT_PRESENT, b""  # no such record: the repository is empty


def _sel_time(data: bytes, name: str) -> tuple[int, bytes]:
    return 0, struct.pack("<I", 0)  # "unspecified" time, as a BMC never set


def _guid(data: bytes, name: str) -> tuple[int, bytes]:
    return 0, uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.bmc.hwlab").bytes_le


#: (netfn, command) -> answer
ANSWERS: dict[tuple[int, int], Answer] = {
    (0x06, 0x37): _guid,  # Get Device GUID
    (0x06, 0x08): _guid,  # Get System GUID
    (0x0A, 0x20): _sdr_info,  # Get SDR Repository Info
    (0x0A, 0x22): _reserve,  # Reserve SDR Repository
    (0x0A, 0x23): _get_sdr,  # Get SDR
    (0x0A, 0x40): _sel_info,  # Get SEL Info
    (0x0A, 0x42): _reserve,  # Reserve SEL
    (0x0A, 0x43): _not_present,  # Get SEL Entry
    (0x0A, 0x48): _sel_time,  # Get SEL Time
}


def answer(netfn: int, command: int, data: bytes, name: str) -> tuple[int, bytes]:
    """Completion code and data; 0xC1 (invalid command) for anything else."""
    found = ANSWERS.get((netfn, command))
    return found(data, name) if found is not None else (0xC1, b"")
