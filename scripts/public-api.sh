#!/usr/bin/env bash
# The public API of hipjit, listed from rustdoc's JSON (scripts/public-api.py) with the
# library's features (redis, testing, half; cli adds no API), and compared with the listing
# checked in at docs/public-api.txt: any change to the surface is a visible diff in review.
#
# Usage: scripts/public-api.sh           check: exit 1 with the diff when they differ
#        scripts/public-api.sh --write   write docs/public-api.txt from the source
#
# rustdoc's JSON output is unstable: RUSTC_BOOTSTRAP=1 lets the pinned stable toolchain
# write it (format version FORMAT_VERSION of public-api.py; a new toolchain may need that
# script updated). It builds in target/public-api, apart from the normal builds, whose
# fingerprints RUSTC_BOOTSTRAP would otherwise invalidate.
set -euo pipefail

cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
target=target/public-api
listing=docs/public-api.txt

RUSTC_BOOTSTRAP=1 cargo rustdoc -q -p hipjit --lib --features redis,testing,half \
    --target-dir "$target" -- -Z unstable-options --output-format json --document-hidden-items
now=$(mktemp "${TMPDIR:-/tmp}/hipjit-public-api.XXXXXX")
trap 'rm -f -- "$now"' EXIT
python3 scripts/public-api.py "$target/doc/hipjit.json" >"$now"

if [[ "${1:-}" == --write ]]; then
    cp -- "$now" "$listing"
    echo "public-api: wrote $listing ($(wc -l <"$listing") items)"
elif diff -u --label "$listing (checked in)" --label "the source now" "$listing" "$now"; then
    echo "public-api: the public API matches $listing ($(wc -l <"$listing") items)"
else
    echo "public-api: the public API differs from $listing (above): if the change is meant," \
        "run scripts/public-api.sh --write, commit the listing and say it in CHANGELOG.md" >&2
    exit 1
fi
