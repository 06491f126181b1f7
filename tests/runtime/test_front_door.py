"""The public front door: `from phoenix_nb import Phoenix, Conversation, Settings, PhoenixError`.

Its names are pinned here, so adding or dropping one is a deliberate change;
each is the real class (not a copy), every deliberate phoenix error is a
`PhoenixError`, and importing the package stays cheap (the runtime and the SDK
load only when a name is used).
"""

from __future__ import annotations

import subprocess
import sys

import phoenix_nb
from phoenix_nb.errors import ConversationBusy, PhoenixError, Rejected, UnknownConversation


def test_all_is_pinned() -> None:
    assert phoenix_nb.__all__ == [
        "Conversation",
        "Phoenix",
        "PhoenixError",
        "Settings",
        "__version__",
    ]


def test_front_door_names_are_the_real_ones() -> None:
    from phoenix_nb import Conversation, Phoenix, Settings
    from phoenix_nb import PhoenixError as Root
    from phoenix_nb.runtime import manager, settings

    assert Phoenix is manager.Phoenix and Conversation is manager.Conversation
    assert Settings is settings.Settings
    assert Root is PhoenixError
    for name in phoenix_nb.__all__:
        assert getattr(phoenix_nb, name) is not None


def test_phoenix_errors_share_one_root() -> None:
    from phoenix_nb.core.codec import CodecError
    from phoenix_nb.llm.errors import LlmCallError
    from phoenix_nb.llm.images import ImageError
    from phoenix_nb.notebook.options import OptionsError
    from phoenix_nb.sandbox import SandboxError
    from phoenix_nb.store import StoreError
    from phoenix_nb.store.journal import JournalCorrupt
    from phoenix_nb.tools.keyword_search import SearchError

    errors = (UnknownConversation, Rejected, ConversationBusy, LlmCallError, CodecError)
    errors += (ImageError, OptionsError, StoreError, JournalCorrupt, SearchError, SandboxError)
    for cls in errors:
        assert issubclass(cls, PhoenixError), cls
    # the old bases still hold, so nothing that caught them changes
    assert issubclass(ImageError, ValueError) and issubclass(SandboxError, RuntimeError)


def test_importing_the_package_loads_neither_runtime_nor_sdk() -> None:
    code = (
        "import sys, phoenix_nb; "
        "print(sorted(m for m in ('anthropic', 'phoenix_nb.runtime.manager') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
