#!/usr/bin/env bash
# Type-check bmaas as it installs: one import root, `bmaas`, with the
# repository's drivers/, fakes/ and hwlab/ folders as `bmaas.drivers`,
# `bmaas.fakes` and `bmaas.hwlab` (pyproject.toml's package-dir). mypy cannot
# follow setuptools' package-dir mapping, so it reads a tree of symlinks laid
# out as the wheel is (.typecheck/, rebuilt every run, ignored by git); an
# error's path is the tree's, `.typecheck/bmaas/drivers/...` for drivers/....
#
#   bash scripts/mypy.sh            # strict, as CI runs it (pyproject.toml)
#   bash scripts/mypy.sh --no-incremental
set -euo pipefail
cd "$(dirname "$0")/.."
tree=.typecheck/bmaas
rm -rf .typecheck
mkdir -p "$tree"
for entry in bmaas/*; do
    ln -s "../../$entry" "$tree/$(basename "$entry")"
done
for folder in drivers fakes hwlab; do
    ln -s "../../$folder" "$tree/$folder"
done
exec "${MYPY:-mypy}" "$@"
