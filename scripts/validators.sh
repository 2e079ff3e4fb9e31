#!/usr/bin/env bash
# DMTF's three Redfish validators against a freshly started hwlab lab (or any
# Redfish service with --url), pinned, in a venv of their own.
#
#   scripts/validators.sh [--url URL --user U --password P] [--service-size N]
#                         [--schemas DIR] [--profile FILE] [--out DIR]
#                         [--authtype Session|Basic] [--tls] [--shape NAME]
#
# Without --url it starts `hwlab up --nodes N --protocols redfish` (N = the
# service size, default 1; --tls: over HTTPS, --redfish-tls; --shape: every
# BMC in that vendor shape, `hwlab up --shape`) in a private state directory
# and stops it on exit.
# --schemas: DSP8010 CSDL files (Redfish-Publications' csdl/); without it the
# copy vendored in tests/fixtures/redfish-csdl/ (2025.4), so no network is needed. --profile: the interop
# profile (default: Ironic's OpenStackIronicProfile.v1_2_0, vendored under
# tests/fixtures/redfish-profiles/). --authtype Basic for a service without
# a SessionService (stock sushy-tools). Prints one line of counts per validator
# (the protocol validator's per category) and exits 1 when the service or the
# interop validator reports a failure or a validator does not finish (the
# protocol validator's failures are reported, not held: see docs/vendors.md).
#
# Environment: DMTF_VENV (default ~/.cache/bmaas-dmtf-venv), HWLAB (the hwlab command,
# default .venv/bin/hwlab, else `hwlab` on PATH), PYTHON (the interpreter that makes the venv, default python3).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
url="" user="admin" password="hwlab-password" size=1 schemas="" out="" authtype=Session tls=no shape=""
profile="$here/tests/fixtures/redfish-profiles/OpenStackIronicProfile.v1_2_0.json"
while [ $# -gt 0 ]; do
    case "$1" in
        --url) url=$2; shift 2 ;;
        --user) user=$2; shift 2 ;;
        --password) password=$2; shift 2 ;;
        --service-size) size=$2; shift 2 ;;
        --schemas) schemas=$2; shift 2 ;;
        --profile) profile=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --authtype) authtype=$2; shift 2 ;;
        --tls) tls=yes; shift ;;
        --shape) shape=$2; shift 2 ;;
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
        *) echo "validators.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

venv=${DMTF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/bmaas-dmtf-venv}
pins=(redfish-service-validator==3.1.8 redfish-protocol-validator==1.3.2 redfish-interop-validator==3.0.4)
have=$("$venv/bin/python" -m pip freeze 2>/dev/null | tr '_A-Z' '-a-z' || true)
for pin in "${pins[@]}"; do
    if ! grep -qx "$pin" <<<"$have"; then
        "${PYTHON:-python3}" -m venv "$venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" 2>&1 |
            grep -v "^WARNING: Location '.*' is ignored" >&2 || true
        break
    fi
done

work=$(mktemp -d -t hwlab-validators.XXXXXX)
out=${out:-$work/reports}
rm -rf "$out/service" "$out/protocol" "$out/interop"
mkdir -p "$out"
if [ -z "${HWLAB:-}" ] && [ -x "$here/.venv/bin/hwlab" ]; then
    HWLAB=$here/.venv/bin/hwlab  # scripts/setup.sh's
fi
hwlab=${HWLAB:-hwlab}
cleanup() {
    if [ -z "$url" ] || [ -f "$work/started" ]; then
        $hwlab down --state-dir "$work/lab" >/dev/null 2>&1 || true
    fi
    rm -rf "$work/lab"
}
trap cleanup EXIT

if [ -z "$url" ]; then
    tls_args=()
    [ $tls = yes ] && tls_args=(--redfish-tls)
    [ -n "$shape" ] && tls_args+=(--shape "$shape")
    $hwlab up --nodes "$size" --protocols redfish --redfish-service-size "$size" \
        "${tls_args[@]}" --state-dir "$work/lab" --timeout 120 >/dev/null
    touch "$work/started"
    url=$(grep -o '"redfish_address": "[^"]*"' "$work/lab/inventory.yaml" | head -1 | cut -d'"' -f4)
    user=$(grep -o '"redfish_username": "[^"]*"' "$work/lab/inventory.yaml" | head -1 | cut -d'"' -f4)
    password=$(grep -o '"redfish_password": "[^"]*"' "$work/lab/inventory.yaml" | head -1 | cut -d'"' -f4)
fi

if [ -z "$schemas" ]; then  # the vendored DSP8010 CSDL (tests/fixtures/redfish-csdl/SOURCE.md)
    tar -xJf "$here/tests/fixtures/redfish-csdl/DSP8010-2025.4-csdl.tar.xz" -C "$work"
    schemas=$work/csdl
fi
schema_args=(--schema_directory "$schemas")
status=0
"$venv/bin/rf_service_validator" -u "$user" -p "$password" -r "$url" --authtype "$authtype" \
    "${schema_args[@]}" \
    --logdir "$out/service" >"$out/service.txt" 2>&1 || true
cert_args=()
if [ -f "$work/started" ] && [ $tls = yes ]; then # the lab's own CA, made for the run
    ca=$(grep -o '"redfish_verify_ca": "[^"]*"' "$work/lab/inventory.yaml" | head -1 | cut -d'"' -f4)
    cert_args=(--ca-bundle "$ca")
elif [[ $url == https:* ]]; then
    cert_args=(--no-cert-check)
fi
"$venv/bin/rf_protocol_validator" -u "$user" -p "$password" -r "$url" --avoid-http-redirect \
    "${cert_args[@]}" \
    --report-dir "$out/protocol" --report-type tsv >"$out/protocol.txt" 2>&1 || true
"$venv/bin/rf_interop_validator" -u "$user" -p "$password" -r "$url" --authtype "$authtype" \
    --logdir "$out/interop" "$profile" >"$out/interop.txt" 2>&1 || true

"$venv/bin/python" - "$out" <<'EOF' || status=1
import collections, csv, glob, re, sys

out = sys.argv[1]
failed = False


def table(name):
    """PASS/WARN/FAIL/NOT TESTED from a service or interop validator's summary."""
    text = open(f"{out}/{name}.txt").read()
    found = re.search(r"\|\s*PASS\s*\|.*\n.*\n\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", text)
    if found is None:
        return None
    return dict(zip(("pass", "warn", "fail", "not tested"), map(int, found.groups())))


for name in ("service", "interop"):
    counts = table(name)
    print(f"{name}: {counts if counts else 'did not finish (see ' + out + '/' + name + '.txt)'}")
    if counts is None or counts["fail"]:
        failed = True

categories = {"PROTO": "protocol", "REQ": "requests", "RESP": "responses", "SERV": "service", "SEC": "security"}
reports = glob.glob(f"{out}/protocol/*.tsv")
if not reports:
    print(f"protocol: did not finish (see {out}/protocol.txt)")
    failed = True
else:
    counts = collections.Counter()
    with open(reports[0]) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            counts[(categories.get(row["Assertion"].split("_")[0], "other"), row["Result"])] += 1
    for category in categories.values():
        line = ", ".join(f"{r.lower()} {counts[(category, r)]}" for r in ("PASS", "WARN", "FAIL", "NOT_TESTED"))
        print(f"protocol {category}: {line}")
print(f"reports: {out}")
sys.exit(1 if failed else 0)
EOF
exit $status
