"""Parse `%%phoenix` cell options and `%phoenix` subcommands, and say how to use them.

argparse gives exact option names and clear messages; its habit of exiting the
process is turned into `OptionsError`, which the magics print as one line. A
misspelt option or subcommand gets the closest real one suggested (difflib), and
`HELP_TEXT` lists every option and subcommand with an example; a test checks the
parsers and the help never drift apart.
"""

from __future__ import annotations

import argparse
import difflib
import shlex
import textwrap
from dataclasses import dataclass, field
from typing import Any, NoReturn

from phoenix_nb.errors import PhoenixError

ON_UPGRADE_CHOICES = ("ask", "approve", "deny")
MODE_CHOICES = ("restricted", "unrestricted")
EXPORT_FORMATS = ("md", "json", "html")
HELP_FLAGS = ("--help", "-h")


@dataclass(frozen=True)
class HelpLine:
    usage: str
    what: str
    example: str


CELL_HELP = (
    HelpLine("--new", "start a new conversation", "%%phoenix --new"),
    HelpLine("--name SLUG", "talk to (or create) conversation SLUG", "%%phoenix --name fix-tax"),
    HelpLine("--cwd DIR", "folder the agent works in (at creation)", "%%phoenix --new --cwd src"),
    HelpLine("--model NAME", "model (at creation); demo is offline", "%%phoenix --model demo"),
    HelpLine(
        "--mode MODE",
        "restricted (read-only) or unrestricted, at creation",
        "%%phoenix --new --mode unrestricted",
    ),
    HelpLine("--image SPEC", "attach an image: a file or a variable", "%%phoenix --image fig"),
    HelpLine(
        "--on-upgrade ANSWER",
        "answer a write-access request in advance: ask, approve, deny",
        "%%phoenix --on-upgrade approve",
    ),
    HelpLine("--help", "this help (no message needed)", "%%phoenix --help"),
)

SUBCOMMAND_HELP = (
    HelpLine("status [SLUG]", "the conversation, its state, mode and context", "%phoenix status"),
    HelpLine("list", "every conversation in the store", "%phoenix list"),
    HelpLine("new", "start a new conversation for this notebook", "%phoenix new"),
    HelpLine("use SLUG", "make SLUG this notebook's conversation", "%phoenix use brave-otter"),
    HelpLine(
        "approve [ID]",
        "give the agent the write access it asked for; with an ID, approve that pending "
        "request (e.g. an MCP server)",
        "%phoenix approve",
    ),
    HelpLine(
        "deny [ID]",
        "refuse the write access it asked for; with an ID, deny that pending request",
        "%phoenix deny",
    ),
    HelpLine("restrict", "back to read-only (Restricted) now", "%phoenix restrict"),
    HelpLine("cancel", "stop what the agent is doing", "%phoenix cancel"),
    HelpLine(
        "continue", "carry on in a new conversation seeded with a summary", "%phoenix continue"
    ),
    HelpLine(
        "history [SLUG]",
        "what the notebook does not show yet, then a summary of the rest",
        "%phoenix history",
    ),
    HelpLine("chat", "a chat panel for this notebook's conversation", "%phoenix chat"),
    HelpLine(
        "export [SLUG] [--format md|json|html] [--output PATH]",
        "write the conversation to a file (default SLUG.md here)",
        "%phoenix export --format html --output fix.html",
    ),
    HelpLine(
        "checkpoints",
        "snapshots of the folder taken while the agent could write",
        "%phoenix checkpoints",
    ),
    HelpLine("edits", "the agent's cell edits still waiting for you", "%phoenix edits"),
    HelpLine(
        "mcp [list | approve NAME|--all | deny NAME | restart NAME]",
        "MCP servers: state, grants, tools; approve a project .mcp.json server",
        "%phoenix mcp approve time",
    ),
    HelpLine(
        "revert [N | --to-approval] [--force]",
        "put the folder back as it was (default: before the last turn that changed it)",
        "%phoenix revert --to-approval",
    ),
    HelpLine(
        "repair [SLUG]",
        "go on with what is intact of a damaged conversation (the damaged file is kept)",
        "%phoenix repair brave-otter",
    ),
    HelpLine("help", "this help", "%phoenix help"),
)


# The subcommands are the help's entries: one list, so a new one cannot go unexplained.
SUBCOMMANDS = tuple(h.usage.split()[0] for h in SUBCOMMAND_HELP)


HELP_WIDTH = 100  # a notebook's output column: longer lines wrap mid-word there


def _table(lines: tuple[HelpLine, ...], prefix: str) -> list[str]:
    """Each entry as its usage, then what it does and an example indented below it (an
    example is never split): a usage column as wide as the longest usage would push
    lines past HELP_WIDTH."""
    indent = " " * 6
    out: list[str] = []
    for h in lines:
        out.append(f"  {prefix}{h.usage}")
        what = textwrap.wrap(
            h.what,
            HELP_WIDTH,
            initial_indent=indent,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
        example = f"e.g. {h.example}"
        if len(what[-1]) + 3 + len(example) <= HELP_WIDTH:
            what[-1] += f"   {example}"
        else:
            what.append(indent + example)
        out += what
    return out


HELP_TEXT = "\n".join(
    [
        "phoenix: a coding agent in your notebook.",
        "",
        "A %%phoenix cell sends the text below its first line to the notebook's conversation:",
        *_table(CELL_HELP, "%%phoenix "),
        "",
        "%phoenix lines manage conversations:",
        *_table(SUBCOMMAND_HELP, "%phoenix "),
        "",
        "The agent starts read-only (Restricted); it asks before it may write.",
    ]
)


class OptionsError(PhoenixError, ValueError):
    """A user mistake in a magic line; its text is shown as one line."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.option_names: list[str] = []  # every option string added, for near-miss hints
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.option_names.extend(action.option_strings)
        return action

    def error(self, message: str) -> NoReturn:
        raise OptionsError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise OptionsError(message.strip() if message else f"{self.prog}: invalid options")


def _closest(word: str, choices: list[str]) -> str:
    """' (did you mean --new?)' for a near miss, else ''."""
    near = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f" (did you mean {near[0]}?)" if near else ""


def _parse(parser: _Parser, argv: list[str]) -> argparse.Namespace:
    """Parse, naming the closest real option for each unknown one."""
    ns, unknown = parser.parse_known_args(argv)
    if unknown:
        options = parser.option_names
        word = unknown[0]
        if word.startswith("-"):
            guess = _closest(word.split("=", 1)[0], options)
            raise OptionsError(f"{parser.prog}: unknown option {word}{guess}; see %phoenix help")
        raise OptionsError(f"{parser.prog}: unexpected argument {word!r}; see %phoenix help")
    return ns


@dataclass(frozen=True)
class CellOptions:
    new: bool = False
    name: str | None = None
    cwd: str | None = None
    model: str | None = None
    mode: str | None = None
    images: tuple[str, ...] = ()
    on_upgrade: str = "ask"
    help: bool = False


def _cell_parser() -> _Parser:
    parser = _Parser(prog="%%phoenix", add_help=False, allow_abbrev=False)
    parser.add_argument("--new", action="store_true", help="start a new conversation")
    parser.add_argument("--name", help="use or create the conversation with this slug")
    parser.add_argument("--cwd", help="working directory (at creation only)")
    parser.add_argument("--model", help="model name (at creation only); 'demo' is offline")
    parser.add_argument("--mode", choices=MODE_CHOICES, help="mode at creation")
    parser.add_argument(
        "--image", action="append", default=[], help="a file path or a variable holding an image"
    )
    parser.add_argument("--on-upgrade", choices=ON_UPGRADE_CHOICES, default="ask")
    parser.add_argument("--help", "-h", action="store_true", dest="help")
    return parser


def parse_cell_options(line: str) -> CellOptions:
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise OptionsError(f"cannot parse the %%phoenix options: {exc}") from None
    if any(a in HELP_FLAGS for a in argv):
        return CellOptions(help=True)
    ns = _parse(_cell_parser(), argv)
    if ns.new and ns.name:
        raise OptionsError("%%phoenix: use either --new or --name, not both")
    return CellOptions(
        new=ns.new,
        name=ns.name,
        cwd=ns.cwd,
        model=ns.model,
        mode=ns.mode,
        images=tuple(ns.image),
        on_upgrade=ns.on_upgrade,
    )


@dataclass(frozen=True)
class Subcommand:
    name: str
    slug: str | None = None
    format: str = "md"
    output: str | None = None
    extra: tuple[str, ...] = field(default_factory=tuple)
    target: int | None = None  # revert: checkpoint number
    to_approval: bool = False  # revert --to-approval
    force: bool = False  # revert --force


def parse_subcommand(line: str) -> Subcommand:
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise OptionsError(f"cannot parse the %phoenix line: {exc}") from None
    if not argv:
        return Subcommand("status")
    name, rest = argv[0], argv[1:]
    if name in HELP_FLAGS or any(a in HELP_FLAGS for a in rest):
        return Subcommand("help")
    if name not in SUBCOMMANDS:
        raise OptionsError(
            f"unknown subcommand {name!r}{_closest(name, list(SUBCOMMANDS))}; "
            "`%phoenix help` lists them"
        )
    parser = _Parser(prog=f"%phoenix {name}", add_help=False, allow_abbrev=False)
    if name in ("use",):
        parser.add_argument("slug")
    elif name in ("history", "status", "repair"):
        parser.add_argument("slug", nargs="?")
    elif name == "export":
        parser.add_argument("slug", nargs="?")
        parser.add_argument("--format", choices=EXPORT_FORMATS, default=None)
        parser.add_argument("--output", "-o", default=None)
    elif name in ("approve", "deny"):
        parser.add_argument("request", nargs="?")  # a pending request's id (any kind)
    elif name == "mcp":
        parser.add_argument("action", nargs="?", default="list")
        parser.add_argument("server", nargs="?")
        parser.add_argument("--all", action="store_true")
    elif name == "revert":
        parser.add_argument("target", nargs="?", type=int)
        parser.add_argument("--to-approval", action="store_true")
        parser.add_argument("--force", action="store_true")
    ns = _parse(parser, rest)
    if name == "mcp":
        if ns.action not in ("list", "approve", "deny", "restart"):
            raise OptionsError(
                "%phoenix mcp takes list, approve NAME|--all, deny NAME, restart NAME"
            )
        if ns.action != "list" and not ns.server and not (ns.all and ns.action == "approve"):
            raise OptionsError(f"%phoenix mcp {ns.action}: name the server")
        extra = (ns.action, *((ns.server,) if ns.server else ()))
        return Subcommand(name, extra=extra, force=ns.all)
    if name in ("approve", "deny"):
        return Subcommand(name, extra=(ns.request,) if ns.request else ())
    if name == "revert":
        if ns.target is not None and ns.to_approval:
            raise OptionsError(
                "%phoenix revert: give a checkpoint number or --to-approval, not both"
            )
        return Subcommand(name, target=ns.target, to_approval=ns.to_approval, force=ns.force)
    output = getattr(ns, "output", None)
    fmt = getattr(ns, "format", None)
    if fmt is None:
        suffix = output.rsplit(".", 1)[-1].lower() if output and "." in output else ""
        fmt = {"md": "md", "markdown": "md", "json": "json", "html": "html", "htm": "html"}.get(
            suffix, "md"
        )
    return Subcommand(name, slug=getattr(ns, "slug", None), format=fmt, output=output)
