#!/usr/bin/env bash
# Cut a release (docs/releases.md, "Cutting a release"):
#
#   scripts/release.sh --notes X.Y.Z   set bmaas.__version__ to X.Y.Z, compile the
#                                      notes in docs/changes/ into docs/releases.md
#                                      (towncrier build, which removes them) and add
#                                      the section's Compatibility list; then stop:
#                                      read it, complete it, commit it
#   scripts/release.sh [--tag]         build the sdist and wheel of HEAD (the
#                                      committed tree, not the work tree) into dist/
#                                      (kept), check LICENSE and NOTICE are in both,
#                                      print the `git tag -a vX.Y.Z` to run; --tag runs it
#   scripts/release.sh --dev           the same build for a HEAD between releases
#                                      (0.5.0.dev0): versioned VERSION+gCOMMIT
#                                      (0.5.0.dev0+g148b1d4), never tagged
#
# The version is checked before anything is installed: a HEAD that is not a
# release is refused at once (use --dev). Needs the `release` extra (build,
# towncrier); installs it into .venv through scripts/setup.sh when missing
# (`--for demo`: bmaas, its lab extra and the release extra, not the test
# tools). A build needs only `build`: PYTHON=/path/to/python (a venv with
# build) skips .venv altogether, as scripts/wheel-smoke.sh does. Prints each
# step and its time.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
notes=""
tag=no
dev=no
t0=$(date +%s.%N)

say() { printf 'release: %s\n' "$*" >&2; }
die() {
    say "$*"
    exit 1
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
    --notes)
        [ $# -ge 2 ] || die "--notes needs the version: --notes X.Y.Z"
        notes=$2
        shift 2
        ;;
    --tag)
        tag=yes
        shift
        ;;
    --dev)
        dev=yes
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
done

[ $dev = no ] || [ -z "$notes" ] || die "--dev builds HEAD as it is: not with --notes"
[ $dev = no ] || [ $tag = no ] || die "--dev builds are never tagged: not with --tag"

# what the release step needs, checked before anything is installed
if [ -n "$notes" ]; then
    [[ $notes =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "a release version is X.Y.Z, not '$notes'"
    if grep -q "^## $notes (" docs/releases.md; then
        die "docs/releases.md already has a section for $notes"
    fi
else
    version=$(git show HEAD:bmaas/__init__.py | sed -n -E 's/^__version__ = "([^"]*)"$/\1/p')
    [ -n "$version" ] || die "no __version__ in HEAD's bmaas/__init__.py"
    if [ $dev = no ]; then
        [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
            die "HEAD is at $version, not a release: run scripts/release.sh --notes X.Y.Z and commit, or build a development snapshot with scripts/release.sh --dev"
        # (grep without -q: with pipefail, -q's early exit would fail git show on SIGPIPE)
        git show HEAD:docs/releases.md | grep "^## $version (" >/dev/null ||
            die "HEAD's docs/releases.md has no section for $version: run scripts/release.sh --notes $version"
    fi
fi

# the notes need towncrier (and bmaas: the schema's revision), a build only
# the build front-end (PYTHON=any Python with `build` will do)
needs="import build"
[ -z "$notes" ] || needs="import towncrier, bmaas.store.migrate"
if ! "$python" -c "$needs" 2>/dev/null; then
    say "installing the release extra (build, towncrier) into .venv..."
    BMAAS_SETUP_EXTRAS=release bash scripts/setup.sh --for demo
fi

# -- notes: the version and its section of docs/releases.md ------------------
if [ -n "$notes" ]; then
    t=$(date +%s.%N)
    sed -i -E "s/^__version__ = \"[^\"]*\"$/__version__ = \"$notes\"/" bmaas/__init__.py
    grep -q "^__version__ = \"$notes\"$" bmaas/__init__.py || die "could not set __version__ in bmaas/__init__.py"
    say "bmaas/__init__.py: __version__ = \"$notes\""
    "$python" -m towncrier build --version "$notes" --yes >&2
    # the Compatibility list: what a release must say, from the tree itself
    "$python" - "$notes" <<'EOF'
import re
import sys
import tomllib
from pathlib import Path

from bmaas.store.migrate import head_revision

version = sys.argv[1]
pyproject = tomllib.loads(Path("pyproject.toml").read_text())
python = pyproject["project"]["requires-python"]
# the releases CI tests: one constraints file each (scripts/ironic-env.sh --release)
tested = sorted(
    (p.stem for p in Path("scripts/ironic-constraints").glob("*.txt")),
    key=lambda v: [int(x) for x in v.split(".")],
    reverse=True,
)
ironic = " and ".join(tested) if tested else "(see scripts/ironic-env.sh)"
block = f"""### Compatibility

- **Python:** `requires-python = "{python}"`.
- **Store schema:** revision `{head_revision()}` (the Alembic head); a store at an older
  revision is migrated by `bmaas db upgrade` ([upgrading the store](#upgrading-the-store)).
- **Ironic:** tested in CI with Ironic {ironic} (`scripts/ironic-env.sh --release`
  installs each with its constraints, `scripts/ironic-constraints/`).

"""
path = Path("docs/releases.md")
text = path.read_text()
heading = re.search(rf"^## {re.escape(version)} \(.*\)\n\n", text, re.MULTILINE)
if heading is None:
    sys.exit(f"release: towncrier wrote no '## {version} (...)' section")
path.write_text(text[: heading.end()] + block + text[heading.end() :])
EOF
    say "docs/releases.md: the $notes section, with its Compatibility list ($(since "$t"))"
    say "next: read and complete the section (Ironic releases known to work outside CI, a"
    say "summary on top), commit bmaas/__init__.py docs/releases.md docs/changes/, then run"
    say "bash scripts/release.sh [--tag]"
    exit 0
fi

# -- build: HEAD's sdist and wheel into dist/ ---------------------------------
commit=$(git rev-parse --short HEAD)
left=$(git ls-tree --name-only HEAD docs/changes/ | grep -v '/\.gitkeep$' || true)
[ $dev = yes ] || [ -z "$left" ] || say "warning: notes in docs/changes/ not in $version's section: $left"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    say "note: the work tree has uncommitted changes; the release is HEAD's tree without them"
fi

work=$(mktemp -d -t bmaas-release-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
git archive HEAD | tar -x -C "$work/src"
if [ $dev = yes ]; then
    # a development snapshot says which commit it is (PEP 440 local version);
    # the repository's own __version__ is left as it is
    version="$version+g$commit"
    sed -i -E "s/^__version__ = \"[^\"]*\"$/__version__ = \"$version\"/" "$work/src/bmaas/__init__.py"
    grep -q "^__version__ = \"$version\"$" "$work/src/bmaas/__init__.py" || die "could not set the snapshot's version"
fi
t=$(date +%s.%N)
say "building bmaas $version (sdist, then the wheel from it) from HEAD ($commit)..."
if ! "$python" -m build --outdir "$work/dist" "$work/src" >"$work/build.log" 2>&1; then
    tail -30 "$work/build.log" >&2
    die "the build failed"
fi
sdist=dist/bmaas-$version.tar.gz
wheel=dist/bmaas-$version-py3-none-any.whl
mkdir -p dist
rm -f "$sdist" "$wheel"
cp "$work/dist/bmaas-$version.tar.gz" "$work/dist/bmaas-$version-py3-none-any.whl" dist/
say "built $sdist and $wheel ($(since "$t"))"
"$python" scripts/check_dist.py --tree "$work/src" "$sdist" "$wheel" >&2
(cd dist && sha256sum "bmaas-$version.tar.gz" "bmaas-$version-py3-none-any.whl") >&2

# -- tag -----------------------------------------------------------------------
if [ $dev = yes ]; then
    say "a development snapshot of $(git rev-parse HEAD): not tagged; done in $(since "$t0")"
    exit 0
fi
# a clone may carry no tags: docs/releases.md names each release's commit
say "bmaas $version is commit $(git rev-parse HEAD): add it to docs/releases.md's table of releases"
command=(git tag -a "v$version" -m "bmaas $version")
if git rev-parse -q --verify "refs/tags/v$version" >/dev/null; then
    if [ "$(git rev-parse "v$version^{commit}")" = "$(git rev-parse HEAD)" ]; then
        say "tag v$version exists and points at HEAD"
    else
        die "tag v$version exists at another commit ($(git rev-parse --short "v$version^{commit}"))"
    fi
elif [ $tag = yes ]; then
    "${command[@]}"
    say "tagged v$version at $(git rev-parse --short HEAD) (push it with the commit)"
else
    say "to tag this release: git tag -a v$version -m \"bmaas $version\" (or run this script with --tag)"
fi
say "done in $(since "$t0")"
