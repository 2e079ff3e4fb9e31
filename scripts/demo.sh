#!/usr/bin/env bash
# Set up everything, then run the main job: a seeded flaky lab, a batch of
# deploys with typed retries, a leak check, teardown. Arguments go to
# 'hwlab demo' (try --json, --nodes 24 --requests 16, --seed 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --for demo  # no test tools: the demo starts sooner
. .venv/bin/activate
hwlab demo "$@"
