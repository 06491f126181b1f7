"""The prebuilt extension is installed and enabled by installing the Python package."""

from __future__ import annotations

import re
import subprocess
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_labextension_list_shows_phoenix_enabled() -> None:
    """`jupyter labextension list` (this interpreter's jupyter) sees phoenix-nb, enabled and OK."""
    completed = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    listing = ANSI.sub("", completed.stdout + completed.stderr)
    line = next((ln for ln in listing.splitlines() if "phoenix-nb" in ln), None)
    assert line is not None, listing
    assert re.search(r"phoenix-nb v\S+ enabled\s+OK \(python, phoenix_nb\)", line), line
