"""The public front door: `from phoenix_nb import Phoenix, Conversation, Settings, PhoenixError`.

Its names are pinned here, so adding or dropping one is a deliberate change;
each is the real class (not a copy), every deliberate phoenix error is a
`PhoenixError`, and importing the package stays cheap (the runtime and the SDK
load only when a name is used).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import subprocess
import sys

import pytest

import phoenix_nb
import phoenix_nb.sandbox as sandbox_face
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


# Every package's face: its `__all__`, pinned. A package whose face is its
# modules lists them; one that re-exports names lists those. Adding or dropping
# a name, or a package, fails here until the face below says so.
FACES: dict[str, list[str]] = {
    "phoenix_nb": phoenix_nb.__all__,  # pinned name by name above
    "phoenix_nb.checkpoints": [
        "changes",
        "config",
        "manifest",
        "objects",
        "recorder",
        "scan",
        "shadow",
        "watch",
    ],
    "phoenix_nb.core": [
        "changes",
        "codec",
        "cycles",
        "displays",
        "effects",
        "events",
        "marks",
        "messages",
        "models",
        "notices",
        "prices",
        "requests",
        "restore",
        "secrets",
        "states",
        "stored",
        "tool_fields",
        "transition",
        "values",
    ],
    "phoenix_nb.commands": [
        "BackgroundJob",
        "BackgroundJobs",
        "CommandEnvironment",
        "CommandRunner",
        "ForkConfinement",
        "command_environment",
        "credential_files",
        "fork_secrets",
        "withheld_summary",
    ],
    "phoenix_nb.demo": ["DemoProvider"],
    "phoenix_nb.hub": [
        "CONVERSATION_HEADER",
        "AuditLog",
        "AuditSink",
        "Gateway",
        "HubTokenAuth",
        "HubUnreachable",
        "Ledger",
        "Metered",
        "Spent",
        "TokenAuth",
        "UsageMeter",
        "main",
        "make_app",
    ],
    "phoenix_nb.llm": [
        "AnthropicProvider",
        "ImageError",
        "LlmCallError",
        "LlmOutcome",
        "LlmRequest",
        "ModelResponse",
        "ProviderNotice",
        "ServerToolInputDelta",
        "ServerToolUseStart",
        "StreamUpdate",
        "TextDelta",
        "ThinkingDelta",
        "ToolInputDelta",
        "ToolUseStart",
        "classify",
        "image_block",
        "make_provider",
        "prepare_image",
    ],
    "phoenix_nb.notebook": [
        "binding",
        "busy",
        "cell",
        "cell_edits_comm",
        "chat",
        "controls",
        "decorate",
        "edits_listing",
        "encoded_display",
        "export",
        "extension",
        "fails",
        "interrupt",
        "ipython_kernel",
        "magics",
        "mcp_lines",
        "options",
        "panel_comm",
        "pending_comm",
        "render",
        "session",
        "throttle",
        "thumbnails",
        "transformer",
        "undo",
        "warmup",
        "whole_record",
    ],
    "phoenix_nb.mcp": [
        "INSTALL_HINT",
        "Approvals",
        "McpBounds",
        "McpConfigError",
        "McpHub",
        "McpTool",
        "Server",
        "ServerConfig",
        "ServerState",
        "mcp_tools",
        "parse_servers",
    ],
    "phoenix_nb.runtime": [
        "child_spend",
        "claim",
        "conversation",
        "executors",
        "gateway_link",
        "lease",
        "long_lived",
        "manager",
        "mcp_requests",
        "pending",
        "ports",
        "prompts",
        "settings",
        "snapshot",
        "subagents",
        "turn_pool",
        "updates",
    ],
    "phoenix_nb.sandbox": sandbox_face.__all__,  # pinned name by name in tests/sandbox/test_face.py
    "phoenix_nb.sandbox.child": [],
    "phoenix_nb.store": [
        "REDACTED",
        "ConversationDamaged",
        "ConversationNotInStore",
        "Damage",
        "JournalCorrupt",
        "JournalDamaged",
        "SlugTaken",
        "Store",
        "StoreError",
        "StoreWriteError",
        "default_root",
        "scrub",
        "store_problem",
        "write_failure",
    ],
    "phoenix_nb.testing": [
        "ConnectionEvent",
        "FakeAnthropic",
        "FakeRequest",
        "Fault",
        "Turn",
        "text",
        "thinking",
        "tool_use",
    ],
    "phoenix_nb.tools": [
        "base",
        "bash",
        "bash_guard",
        "cell_edits",
        "declared",
        "kernel",
        "kernel_port",
        "keyword_search",
        "patch",
        "registry",
        "schema",
        "think",
    ],
    "phoenix_nb.tools.bash_guard": ["check_command", "expand_word"],
    "phoenix_nb.tools.kernel": [
        "EditCellTool",
        "InsertCellTool",
        "InspectVariablesTool",
        "KernelHistoryTool",
        "ProposeCellTool",
        "RunPythonTool",
        "outcome_note",
    ],
    "phoenix_nb.tools.bash_guard.rules": ["RULES", "Rule"],
}
# Packages whose face is their modules: every public module is listed, none other.
MODULE_FACES = (
    "phoenix_nb.checkpoints",
    "phoenix_nb.core",
    "phoenix_nb.notebook",
    "phoenix_nb.runtime",
    "phoenix_nb.tools",
)


def _public_packages() -> list[str]:
    found = ["phoenix_nb"]
    for info in pkgutil.walk_packages(phoenix_nb.__path__, "phoenix_nb."):
        if info.ispkg and not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return sorted(found)


def test_every_public_package_has_a_pinned_face() -> None:
    assert _public_packages() == sorted(FACES)


@pytest.mark.parametrize("name", sorted(FACES))
def test_package_face_is_pinned_and_documented(name: str) -> None:
    package = importlib.import_module(name)
    assert (package.__doc__ or "").strip(), f"{name} states its contract in its docstring"
    assert list(package.__all__) == FACES[name]
    for export in package.__all__:
        spec = importlib.util.find_spec(f"{name}.{export}")
        assert spec is not None or getattr(package, export) is not None, f"{name}.{export}"


@pytest.mark.parametrize("name", MODULE_FACES)
def test_a_module_face_lists_every_public_module(name: str) -> None:
    package = importlib.import_module(name)
    modules = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name[0] != "_")
    assert sorted(package.__all__) == modules
