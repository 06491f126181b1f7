"""Parse `%%phoenix` cell options and `%phoenix` subcommands.

argparse gives exact option names and clear messages; its habit of exiting the
process is turned into `OptionsError`, which the magics print as one line.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, field
from typing import NoReturn

ON_UPGRADE_CHOICES = ("ask", "approve", "deny")
MODE_CHOICES = ("restricted", "unrestricted")
SUBCOMMANDS = (
    "status",
    "list",
    "new",
    "use",
    "approve",
    "deny",
    "restrict",
    "cancel",
    "continue",
    "history",
    "chat",
    "export",
)


class OptionsError(ValueError):
    """A user mistake in a magic line; its text is shown as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise OptionsError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise OptionsError(message.strip() if message else f"{self.prog}: invalid options")


@dataclass(frozen=True)
class CellOptions:
    new: bool = False
    name: str | None = None
    cwd: str | None = None
    model: str | None = None
    mode: str | None = None
    images: tuple[str, ...] = ()
    on_upgrade: str = "ask"


def _cell_parser() -> _Parser:
    parser = _Parser(prog="%%phoenix", add_help=False)
    parser.add_argument("--new", action="store_true", help="start a new conversation")
    parser.add_argument("--name", help="use or create the conversation with this slug")
    parser.add_argument("--cwd", help="working directory (at creation only)")
    parser.add_argument("--model", help="model name (at creation only); 'demo' is offline")
    parser.add_argument("--mode", choices=MODE_CHOICES, help="mode at creation")
    parser.add_argument(
        "--image", action="append", default=[], help="a file path or a variable holding an image"
    )
    parser.add_argument("--on-upgrade", choices=ON_UPGRADE_CHOICES, default="ask")
    return parser


def parse_cell_options(line: str) -> CellOptions:
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise OptionsError(f"%%phoenix: cannot parse options: {exc}") from None
    ns = _cell_parser().parse_args(argv)
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
    extra: tuple[str, ...] = field(default_factory=tuple)


def parse_subcommand(line: str) -> Subcommand:
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise OptionsError(f"%phoenix: cannot parse: {exc}") from None
    if not argv:
        return Subcommand("status")
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        raise OptionsError(
            f"%phoenix: unknown subcommand {name!r}; choose one of {', '.join(SUBCOMMANDS)}"
        )
    parser = _Parser(prog=f"%phoenix {name}", add_help=False)
    if name in ("use",):
        parser.add_argument("slug")
    elif name in ("history", "status"):
        parser.add_argument("slug", nargs="?")
    elif name == "export":
        parser.add_argument("slug", nargs="?")
        parser.add_argument("--format", choices=("md", "json"), default="md")
    ns = parser.parse_args(rest)
    return Subcommand(name, slug=getattr(ns, "slug", None), format=getattr(ns, "format", "md"))
