#!/usr/bin/env bash
# The Python package's tests: builds the wheel (scripts/build-wheel.sh, a debug build), installs
# it with pytest and numpy into a fresh virtual environment (target/python-test-venv, from the
# wheels scripts/setup.sh cached: no network), and runs python/tests with pytest. The tests use
# the real hipcc here and the fixture HIP runtime (tests/fixtures/fake_hip.c, built by the
# tests with cc and opened through HIPJIT_HIP_LIBRARY); torch and CuPy are not installed here,
# so their paths run on a GPU machine (scripts/h200.sh) and against stand-ins here.
#
# Usage: scripts/test-python.sh [PYTEST-ARGS...]
# Ends with pytest's summary and, for scripts/test.sh's count, a libtest-style line
# "test result: ok. N passed; N failed; N ignored; ...".
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."
cache="${HIPJIT_CI_CACHE:-/var/cache/hipjit-ci}"
wheels=target/wheels
venv=target/python-test-venv
bash scripts/build-wheel.sh "$wheels"
python3 -m venv --clear "$venv"
"$venv/bin/pip" install -q --no-index --find-links "$cache/python-wheels" pytest numpy
"$venv/bin/pip" install -q --no-index --no-deps "$wheels"/hipjit-*.whl
report=$(mktemp "${TMPDIR:-/tmp}/hipjit-pytest.XXXXXX")
trap 'rm -f -- "$report"' EXIT
rc=0
"$venv/bin/python" -m pytest -p no:cacheprovider -ra --junitxml="$report" python/tests "$@" || rc=$?
# pytest's counts, in the line scripts/test.sh sums.
read -r tests failures errors skipped < <(
    sed -n 's/.*<testsuite [^>]*errors="\([0-9]*\)" failures="\([0-9]*\)" skipped="\([0-9]*\)" tests="\([0-9]*\)".*/\4 \2 \1 \3/p' "$report" | head -n 1
) || true
tests=${tests:-0} failures=${failures:-0} errors=${errors:-0} skipped=${skipped:-0}
failed=$((failures + errors))
echo "test result: $( ((failed == 0 && rc == 0)) && echo ok || echo FAILED). $((tests - failed - skipped)) passed; $failed failed; $skipped ignored; 0 measured; 0 filtered out (pytest)"
exit "$rc"
