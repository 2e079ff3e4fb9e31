"""Check that a built sdist and wheel carry the licence files, byte for byte
as the tree has them: ``python scripts/check_dist.py [--tree DIR] SDIST WHEEL``
(``DIR``: the source tree they were built from; default this repository).

What is checked (pyproject.toml's ``license-files``, PEP 639):

* the sdist has ``bmaas-VERSION/LICENSE`` and ``bmaas-VERSION/NOTICE``;
* the wheel has ``bmaas-VERSION.dist-info/licenses/LICENSE`` and ``.../NOTICE``,
  and its METADATA says ``License-Expression: Apache-2.0`` and names both
  as ``License-File``.

Standard library only: scripts/wheel-smoke.sh and scripts/release.sh run it
with whatever Python built the files. Exit 0 when all hold, 1 with one line
per problem otherwise.
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LICENSE_FILES = ("LICENSE", "NOTICE")
EXPRESSION = "Apache-2.0"


def _stem(path: Path, suffix: str) -> str:
    """``bmaas-0.4.0`` from ``bmaas-0.4.0.tar.gz`` / ``bmaas-0.4.0-py3-none-any.whl``."""
    name = path.name
    if suffix == ".tar.gz":
        return name.removesuffix(".tar.gz")
    name_part, version = name.split("-")[:2]
    return f"{name_part}-{version}"


def check_sdist(sdist: Path, tree: Path = REPO) -> list[str]:
    problems = []
    stem = _stem(sdist, ".tar.gz")
    with tarfile.open(sdist) as tar:
        for name in LICENSE_FILES:
            member = f"{stem}/{name}"
            try:
                data = tar.extractfile(member)
            except KeyError:
                data = None
            if data is None:
                problems.append(f"{sdist.name}: no {member}")
            elif data.read() != (tree / name).read_bytes():
                problems.append(f"{sdist.name}: {member} differs from the tree's {name}")
    return problems


def check_wheel(wheel: Path, tree: Path = REPO) -> list[str]:
    problems = []
    info = f"{_stem(wheel, '.whl')}.dist-info"
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        for name in LICENSE_FILES:
            member = f"{info}/licenses/{name}"
            if member not in names:
                problems.append(f"{wheel.name}: no {member}")
            elif whl.read(member) != (tree / name).read_bytes():
                problems.append(f"{wheel.name}: {member} differs from the tree's {name}")
        metadata = whl.read(f"{info}/METADATA").decode()
    headers = metadata.split("\n\n", 1)[0].splitlines()
    if f"License-Expression: {EXPRESSION}" not in headers:
        problems.append(f"{wheel.name}: METADATA has no 'License-Expression: {EXPRESSION}'")
    for name in LICENSE_FILES:
        if f"License-File: {name}" not in headers:
            problems.append(f"{wheel.name}: METADATA has no 'License-File: {name}'")
    return problems


def main(argv: list[str]) -> int:
    tree = REPO
    if argv[:1] == ["--tree"] and len(argv) > 1:
        tree, argv = Path(argv[1]), argv[2:]
    if len(argv) != 2 or not argv[0].endswith(".tar.gz") or not argv[1].endswith(".whl"):
        print("usage: check_dist.py [--tree DIR] SDIST.tar.gz WHEEL.whl", file=sys.stderr)
        return 2
    sdist, wheel = Path(argv[0]), Path(argv[1])
    problems = check_sdist(sdist, tree) + check_wheel(wheel, tree)
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_dist: {', '.join(LICENSE_FILES)} in {sdist.name} and {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
