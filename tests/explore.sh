#!/usr/bin/env bash
# Exploration, not CI: random seeds and many more examples for the property,
# stateful, fuzz and crash tests. Run it whenever core/, runtime/ or tools/
# change; turn every failure it finds into an explicit @example or a
# deterministic test (the printed seed replays it: PHOENIX_SEED=<n>).
set -euo pipefail
cd "$(dirname "$0")/.."
export PHOENIX_EXPLORE=1
export PHOENIX_EXPLORE_EXAMPLES="${PHOENIX_EXPLORE_EXAMPLES:-2000}"
export PHOENIX_PROPERTY_EXAMPLES="${PHOENIX_PROPERTY_EXAMPLES:-2000}"
export PHOENIX_STATEFUL_EXAMPLES="${PHOENIX_STATEFUL_EXAMPLES:-5000}"
export PHOENIX_CRASH_TRIALS="${PHOENIX_CRASH_TRIALS:-200}"
# No per-test time limit (tests/conftest.py also lifts the tests' own markers):
# thousands of examples take as long as they take.
exec python -m pytest -q -p no:cacheprovider --timeout=0 \
  tests/core tests/runtime/test_crash_restore.py tests/runtime/test_runtime_stateful.py \
  tests/tools/test_tool_fuzz.py tests/tools/test_bash_guard.py \
  tests/notebook/test_render_safety.py "$@"
