"""The input fields the record and the renderers read from our tools' calls, stated once.

The tools (the producers) declare these names in their input schemas; the
record projection (`core/cycles.py`) and every renderer read calls by the same
names, and a test holds each tool's schema to them. A renamed field then fails
a test instead of rendering empty — as it did when the think tool stored
`thoughts` while the record and all three renderers read `thought`.
"""

from __future__ import annotations

from collections.abc import Mapping

BASH_COMMAND = "command"
PATCH_PATH = "path"
SEARCH_QUERY = "query"
THINK_THOUGHTS = "thoughts"
UPGRADE_REASON = "reason"
SUBMIT_RESULT = "result"

# Which input field summarises a call of each tool on one line.
SUMMARY_FIELD: Mapping[str, str] = {
    "bash": BASH_COMMAND,
    "patch": PATCH_PATH,
    "keyword_search": SEARCH_QUERY,
    "think": THINK_THOUGHTS,
    "request_mode_upgrade": UPGRADE_REASON,
    "submit_result": SUBMIT_RESULT,
}
