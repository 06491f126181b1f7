"""keyword_search cannot reveal a credential file, attacked the ways rg could be pointed at one.

rg runs in the Restricted sandbox bash runs in (one mechanism: mode-000
placeholders over the hidden paths in a private mount namespace), with no rule
of its own. A fake HOME holds canary credentials (`~/.ssh/id_rsa`,
`~/.aws/credentials`, `~/.config/gcloud/…`, `~/.netrc`); each test points rg at
them another way — the home folder as search root with ignore files that
re-include the hidden folders, a search root inside a hidden folder, `..`
traversal, a symlinked root, symlinks inside the tree with `--follow`, absolute
paths as search roots, globs that re-include, case variants, `--files` listings,
a hard link the agent tries to make — and checks that neither the content nor
the names inside a hidden folder come back. Every attack that reads a canary is
first shown to work in Unrestricted mode (same tree, same code path), so each
test fails if rg ran outside the sandbox.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from phoenix_nb import sandbox
from phoenix_nb.commands import CommandRunner
from phoenix_nb.core.values import Mode, ToolResult
from phoenix_nb.sandbox import SandboxInfo
from phoenix_nb.tools import keyword_search as ks
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from phoenix_nb.tools.keyword_search import KeywordSearchTool

HIDING = sandbox.detect_sandbox()
pytestmark = pytest.mark.skipif(
    not (
        HIDING.available
        and any(g.name == "credential files unreadable" and g.holds for g in sandbox.guarantees())
    ),
    reason="this host's sandbox cannot hide credential files (see sandbox.guarantees())",
)

CANARIES = {
    ".ssh/id_rsa": "CANARY-ssh-7f3a",
    ".aws/credentials": "CANARY-aws-91bc",
    ".config/gcloud/application_default_credentials.json": "CANARY-gcloud-55d0",
    ".netrc": "CANARY-netrc-2e6f",
}
SECRET_NAMES = ("id_rsa", "credentials", "application_default_credentials")
ORDINARY = "CANARY-ordinary-0000"  # in a normal project file: must be found (the control)


@dataclass
class World:
    home: Path
    project: Path


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A fake HOME with canary credentials and a project beside it; the default deny list."""
    home, project = tmp_path / "home", tmp_path / "project"
    for rel, canary in CANARIES.items():
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"secret = {canary}\n")
    (home / "notes.txt").write_text(f"home note {ORDINARY}\n")
    project.mkdir()
    (project / "app.py").write_text(f"VALUE = '{ORDINARY}'\n")
    monkeypatch.setenv("HOME", str(home))
    yield World(home, project)  # the tool contexts below carry the default policy


def ctx(cwd: Path, mode: Mode = Mode.RESTRICTED, info: SandboxInfo = HIDING) -> ToolContext:
    return ToolContext(
        cwd=cwd,
        mode=mode,
        commands=CommandRunner(group="attack", info=info),
        conversation_id="attack",
    )


async def search(cwd: Path, mode: Mode = Mode.RESTRICTED) -> ToolResult:
    payload = {"query": "q", "search_terms": ["canary", "secret"], "context_lines": 0}
    return await KeywordSearchTool().run(payload, ctx(cwd, mode), "tu")


def leaked(text: str) -> list[str]:
    """Canary contents and names from inside hidden folders found in `text`."""
    found = [c for c in CANARIES.values() if c.lower() in text.lower()]
    return found + [n for n in SECRET_NAMES if n in text]


def with_reinclude_rules(root: Path) -> None:
    """Ignore files that re-include the hidden folders (rg honours both), case variants too."""
    rules = "!.ssh/\n!.aws/\n!.config/\n!.AWS/\n!.Ssh/**\n!.netrc\n!.config/**\n"
    (root / ".ignore").write_text(rules)
    (root / ".rgignore").write_text(rules)


async def raw_rg(cwd: Path, args: list[str], mode: Mode = Mode.RESTRICTED) -> str:
    """rg with arbitrary arguments through the runner keyword_search uses (its only one)."""
    binary = ks.find_rg()
    assert binary is not None
    out: list[bytes] = []
    async with ks._rg(args, ks.rg_spec(ctx(cwd, mode), cwd, binary)) as process:
        async for line in process:
            out.append(line)
        try:
            await process.wait()
        except ks.SearchError as error:
            out.append(str(error).encode())
    return b"".join(out).decode("utf-8", "replace")


# --------------------------------------------------------------- through the tool


async def test_home_as_search_root_with_ignore_files_that_reinclude(world: World) -> None:
    """A notebook opened in the home folder (a dotfiles repo even): whitelisted hidden
    folders are walked by rg, and still read nothing."""
    (world.home / ".git").mkdir()
    with_reinclude_rules(world.home)
    (world.home / ".gitignore").write_text("!.ssh/\n!.aws/\n")
    opened = await search(world.home, Mode.UNRESTRICTED)
    assert "CANARY-ssh-7f3a" in opened.content, "the attack reaches the key without a sandbox"
    result = await search(world.home)
    assert not result.is_error, result.content
    assert ORDINARY in result.content, "ordinary files are still searched"
    assert leaked(result.content) == [], result.content
    assert result.display is not None and leaked(str(result.display)) == []


@pytest.mark.parametrize(
    "where",
    ["inside", "dotdot", "symlinked_aws_root", "symlinked_ssh_root"],
)
async def test_search_root_inside_a_hidden_folder(world: World, where: str) -> None:
    """The working directory itself leads into a hidden folder: a clear error, no content."""
    if where == "inside":
        cwd = world.home / ".aws"
    elif where == "dotdot":
        cwd = world.project / ".." / "home" / ".aws"
    elif where == "symlinked_aws_root":
        (world.project / "aws").symlink_to(world.home / ".aws")
        cwd = world.project / "aws"
    else:
        (world.project / "keys").symlink_to(world.home / ".ssh", target_is_directory=True)
        cwd = world.project / "keys"
    opened = await search(cwd, Mode.UNRESTRICTED)
    assert leaked(opened.content), "the attack reaches the secret without a sandbox"
    result = await search(cwd)
    assert result.is_error and "Permission denied" in result.content, result.content
    assert leaked(result.content) == [], result.content


async def test_symlinks_and_hard_links_in_the_tree(world: World) -> None:
    """Links in the project into the hidden folders: rg does not follow them by default
    and, in the sandbox, could not read through them if it did (below); the agent
    cannot make a hard link to a key (the key is unreadable and the tree read-only)."""
    (world.project / "id").symlink_to(world.home / ".ssh" / "id_rsa")
    (world.project / "awsdir").symlink_to(world.home / ".aws", target_is_directory=True)
    made = await BashTool().run(
        {"command": f"ln {world.home}/.ssh/id_rsa hard; ln {world.home}/.netrc hard2; ls"},
        ctx(world.project),
        "ln",
    )
    assert not (world.project / "hard").exists() and not (world.project / "hard2").exists()
    assert "denied" in made.content.lower() or "not permitted" in made.content.lower()
    result = await search(world.project)
    assert ORDINARY in result.content and leaked(result.content) == [], result.content


# ------------------------------------------------ rg's own options, through its runner


FOLLOW = ["-uuu", "--follow", "-i", "-F", "-e", "canary", "."]
REINCLUDE = ["-uuu", "--glob", ".ssh/**", "--glob", "**", "-i", "-F", "-e", "canary", "."]
CASE = ["-uuu", "--glob-case-insensitive", "--iglob", "*.SSH/**", "--iglob", "**/ID_RSA"]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("follow symlinks", FOLLOW),
        ("absolute roots", ["-uuu", "-F", "-e", "CANARY", "{home}/.ssh", "{home}/.aws"]),
        ("dotdot roots", ["-uuu", "-F", "-e", "CANARY", "../home/.ssh/id_rsa", "../home/.netrc"]),
        ("re-including globs", [*REINCLUDE[:-1], "{home}"]),
        ("case-insensitive globs", [*CASE, "-i", "-F", "-e", "canary", "{home}"]),
        ("file listing", ["--files", "-uuu", "--follow", "{home}", "."]),
        ("a file as the only root", ["-uuu", "-F", "-e", "", "{home}/.netrc"]),
        ("no ignore, no hidden filter", ["-uuu", "-l", "-F", "-e", "CANARY", "{home}"]),
    ],
)
async def test_rg_runner_denies_every_route(world: World, name: str, args: list[str]) -> None:
    """Whatever arguments reach rg, the runner keyword_search uses cannot read a hidden
    path: without the sandbox each of these prints a canary or a hidden file's name."""
    (world.project / "id").symlink_to(world.home / ".ssh" / "id_rsa")
    (world.project / "awsdir").symlink_to(world.home / ".aws", target_is_directory=True)
    (world.project / "homelink").symlink_to(world.home, target_is_directory=True)
    argv = [a.replace("{home}", str(world.home)) for a in args]
    outside = await raw_rg(world.project, argv, Mode.UNRESTRICTED)
    assert leaked(outside), f"{name}: the route reaches a secret without a sandbox"
    inside = await raw_rg(world.project, argv)
    assert leaked(inside) == [], f"{name}: {inside}"


# ------------------------------------------------------------ where there is no sandbox


async def test_restricted_without_a_sandbox_refuses_like_bash(world: World) -> None:
    """Restricted mode where the sandbox is unavailable: keyword_search refuses with the
    very words bash uses (and so reads nothing)."""
    info = SandboxInfo(False, 0, "no Landlock on this test host")
    bash = await BashTool().run({"command": "true"}, ctx(world.project, info=info), "b")
    result = await KeywordSearchTool().run(
        {"query": "q", "search_terms": ["canary"]}, ctx(world.project, info=info), "k"
    )
    assert bash.is_error and result.is_error
    assert (
        result.content
        == bash.content
        == ("Restricted mode is unavailable here: no Landlock on this test host")
    )
