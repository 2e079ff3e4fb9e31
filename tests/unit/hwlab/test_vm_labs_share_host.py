"""VM labs that share a host (issue 49, finding 4), libvirt faked: every
domain named by its lab, ``up`` refusing a domain that is not its own,
``down`` removing exactly its own domains and pool volumes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bmaas.faults import InputError
from bmaas.hwlab.vm import domain
from bmaas.hwlab.vm import lab as vm_lab
from bmaas.hwlab.vm.state import VmLab

UUIDS = {
    "a": "11111111-1111-1111-1111-111111111111",
    "b": "22222222-2222-2222-2222-222222222222",
}


class FakeVirsh:
    """``virsh`` over a dict of domains (name -> XML) and pools' volumes."""

    def __init__(self) -> None:
        self.domains: dict[str, str] = {}
        self.volumes: dict[str, list[str]] = {domain.POOL: []}
        self.calls: list[tuple[str, ...]] = []

    def __call__(
        self, *args: str, uri: str = domain.URI, check: bool = True, timeout: float = 60.0
    ) -> str:
        self.calls.append(args)
        verb = args[0]
        out, ok = self._run(verb, args)
        if not ok and check:
            raise InputError(f"virsh {verb}: error")
        return out if ok else ""

    def _run(self, verb: str, args: tuple[str, ...]) -> tuple[str, bool]:
        if verb == "dumpxml":
            name = args[-1]
            return self.domains.get(name, ""), name in self.domains
        if verb == "define":
            xml = Path(args[1]).read_text()
            name = re.search(r"<name>(.*?)</name>", xml)
            assert name
            self.domains[name.group(1)] = xml
            return "", True
        if verb == "destroy":
            return "", args[1] in self.domains
        if verb == "undefine":
            return "", self.domains.pop(args[1], None) is not None
        if verb == "vol-list":
            pool = self.volumes.get(args[2])
            lines = [f" {v}   /var/lib/libvirt/images/{v}" for v in pool or ()]
            return "\n".join(lines), pool is not None
        if verb == "vol-delete":
            pool = self.volumes[args[3]]
            if args[1] in pool:
                pool.remove(args[1])
                return "", True
            return "", False
        raise AssertionError(f"unexpected virsh {args}")

    def touched(self) -> list[tuple[str, str]]:
        """(verb, name) of every call that changes something."""
        changing = ("define", "destroy", "undefine", "vol-delete")
        return [(c[0], c[1]) for c in self.calls if c[0] in changing]


@pytest.fixture
def virsh(monkeypatch: pytest.MonkeyPatch) -> FakeVirsh:
    fake = FakeVirsh()
    monkeypatch.setattr(domain, "virsh", fake)
    return fake


def _define(fake: FakeVirsh, lab: VmLab, node: str) -> None:
    """The domain ``up`` defines for ``node`` of ``lab``."""
    xml = domain.domain_xml(
        lab.domain(node),
        serial_log=lab.serial_log(node),
        cdrom=Path("/c/x.iso"),
        disk=Path("/d/x.img"),
        description=domain.describe(lab.lab_id, lab.state_dir),
    )
    fake.domains[lab.domain(node)] = xml


def _saved(state: Path, uuid: str) -> VmLab:
    state.mkdir(mode=0o700)
    lab = VmLab(state, ["bmaas-vm-1"], False, {}, "/a.iso", "/b.iso", {"bmaas-vm-1": uuid})
    lab.save()
    return lab


def test_each_lab_names_its_domains_by_its_state_dir(tmp_path: Path) -> None:
    one, two = VmLab(tmp_path / "one", ["bmaas-vm-1"]), VmLab(tmp_path / "two", ["bmaas-vm-1"])
    assert one.lab_id != two.lab_id
    assert re.fullmatch(r"[0-9a-f]{8}", one.lab_id)
    assert one.domain("bmaas-vm-1") == f"bmaas-vm-1-{one.lab_id}"
    assert one.domain("bmaas-vm-1") != two.domain("bmaas-vm-1")
    assert VmLab(tmp_path / "one", []).lab_id == one.lab_id  # stable: down finds what up made
    assert one.lab_id in one.id_text


def test_a_domain_says_which_lab_made_it(virsh: FakeVirsh, tmp_path: Path) -> None:
    lab = VmLab(tmp_path / "one", ["bmaas-vm-1"])
    _define(virsh, lab, "bmaas-vm-1")
    assert domain.owner(lab.domain("bmaas-vm-1")) == lab.lab_id
    virsh.domains["by-hand"] = "<domain><name>by-hand</name></domain>"
    assert domain.owner("by-hand") == ""  # there, and no lab's
    assert domain.owner("nothing") is None


def test_define_and_destroy_never_touch_another_labs_domain(
    virsh: FakeVirsh, tmp_path: Path
) -> None:
    mine, theirs = VmLab(tmp_path / "mine", ["x"]), VmLab(tmp_path / "theirs", ["x"])
    name = mine.domain("x")
    virsh.domains[name] = (  # a domain of my name that another lab made
        f"<domain><name>{name}</name><description>"
        f"{domain.describe(theirs.lab_id, theirs.state_dir)}</description></domain>"
    )
    (tmp_path / "xml").mkdir()
    with pytest.raises(InputError, match=f"is lab {theirs.lab_id}'s: left alone"):
        domain.define(name, "<domain/>", tmp_path / "xml", lab=mine.lab_id)
    assert domain.destroy(name, lab=mine.lab_id) is False
    with pytest.raises(InputError, match="not lab"):
        domain.set_cdrom(name, Path("/c/x.iso"), tmp_path / "xml", lab=mine.lab_id)
    assert virsh.touched() == []
    assert name in virsh.domains


def test_up_refuses_before_making_anything_when_a_name_is_not_its_own(
    virsh: FakeVirsh, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "vm"
    lab = VmLab(state.absolute(), ["bmaas-vm-1", "bmaas-vm-2"])
    for node in lab.domains:  # defined by hand (say, the old fixed-name lab): not hwlab's
        virsh.domains[lab.domain(node)] = f"<domain><name>{lab.domain(node)}</name></domain>"
    monkeypatch.setattr(vm_lab, "build_image", lambda: pytest.fail("built an image"))
    with pytest.raises(InputError) as info:
        vm_lab.up(state, count=2)
    lines = str(info.value).splitlines()
    assert [line for line in lines if "not made by an hwlab VM lab" in line] == [
        f"libvirt domain {lab.domain('bmaas-vm-1')} exists and is not made by an hwlab VM lab",
        f"libvirt domain {lab.domain('bmaas-vm-2')} exists and is not made by an hwlab VM lab",
    ]
    assert virsh.touched() == []
    assert not (state / "vm.json").exists()


def test_down_removes_exactly_its_own_domains_and_volumes(virsh: FakeVirsh, tmp_path: Path) -> None:
    a, b = _saved(tmp_path / "a", UUIDS["a"]), _saved(tmp_path / "b", UUIDS["b"])
    for lab in (a, b):
        _define(virsh, lab, "bmaas-vm-1")
    virsh.domains["bmaas-vm-1"] = "<domain><name>bmaas-vm-1</name></domain>"  # someone's
    virsh.volumes[domain.POOL] = [
        f"bmaas-vmedia-iso-{UUIDS['a']}.img",
        f"bmaas-vmedia-iso-{UUIDS['b']}.img",
        "debian-12.qcow2",
    ]
    stopped = vm_lab.down(tmp_path / "a")
    assert stopped == ["bmaas-vm-1", f"bmaas-vmedia-iso-{UUIDS['a']}.img"]
    assert sorted(virsh.domains) == sorted(["bmaas-vm-1", b.domain("bmaas-vm-1")])
    assert virsh.volumes[domain.POOL] == [f"bmaas-vmedia-iso-{UUIDS['b']}.img", "debian-12.qcow2"]
    assert not (tmp_path / "a" / "vm.json").exists()
    assert (tmp_path / "b" / "vm.json").exists()
    assert vm_lab.down(tmp_path / "a") == []  # safe twice

    assert vm_lab.down(tmp_path / "b") == ["bmaas-vm-1", f"bmaas-vmedia-iso-{UUIDS['b']}.img"]
    assert list(virsh.domains) == ["bmaas-vm-1"]  # what no lab made stays
    assert virsh.volumes[domain.POOL] == ["debian-12.qcow2"]
