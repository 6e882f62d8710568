#!/usr/bin/env bash
# Write constraints.txt: one pinned version of every package the project installs (its dependencies, their
# dependencies and every extra: one set of pins serves the Inspect-only install and `.[all]` alike), for every
# platform (uv's universal resolution, Python 3.11 and up). The bootstrap and the wheel test install with
# `-c constraints.txt`, so every clone gets the versions the suite passed on, and
# the resolver has one candidate per package: unpinned, uv took 44 s backtracking through 4,612 botocore/boto3
# releases after picking python-dateutil 4 (which inspect-ai's s3fs -> aiobotocore cannot take) before it settled
# on the set pinned here (docs/measurements.md). Run it after changing pyproject.toml's dependencies: it keeps
# the pins that still fit and adds the new packages; `bash scripts/lock.sh --upgrade` takes the newest versions
# of everything instead. Either way, rerun the suite on what it writes.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m uv pip compile pyproject.toml --all-extras --universal --python-version 3.11 --quiet \
  --custom-compile-command "bash scripts/lock.sh" -o constraints.txt "$@"
