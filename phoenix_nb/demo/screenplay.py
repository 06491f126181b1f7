"""The offline demo model: the fake Messages API playing a scripted agent.

Without an API key a newcomer still sees phoenix_nb work end to end: real
tools, the real sandbox, the real approval flow. Only the model is scripted,
and every conversation says so in its first reply.

The script is a set of rules on the request, never a fixed queue, so it copes
with whatever the notebook does: cells run twice, a denied upgrade, an already
fixed project, sub-agents running in parallel, a continuation summary. Each
tool call carries its step in its id (`toolu_demo_<step>_…`); the next request
answers it with a tool_result, which tells the script where it is and what the
tool really returned. The screenplay fits `notebooks/sample_project/` (the
`shop` package with an off-by-one bulk discount) and, for the kernel tools,
the tour's `orders` DataFrame whose prices carry a decimal comma; it degrades
to plain, truthful answers anywhere else.

A new message from the user always wins: the results of calls it interrupted
(a cancel) are acknowledged, never mistaken for the step the script was on.
What the script says it changed comes from the patches that applied and were
not reverted since (a revert reaches it as a phoenix notice).
"""

from __future__ import annotations

import base64
import difflib
import io
import itertools
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from phoenix_nb.demo import cell_fix
from phoenix_nb.demo.server import FakeAnthropic
from phoenix_nb.demo.turns import BlockSpec, FakeRequest, Turn, text, tool_use

LABEL = "[demo model — scripted, offline]"
INTRO = (
    f"{LABEL} No ANTHROPIC_API_KEY is set, so phoenix uses this offline demo model "
    "(the default without a key). My words are scripted; the tools I call are real: "
    "they run in your working directory under the same sandbox and approval rules "
    "as with Claude."
)
PACE_ENV = "PHOENIX_DEMO_PACE"
DEFAULT_PACE = 0.01  # seconds between streamed text chunks: visible streaming, short runs

# The sample project's bug, and the one-character fix the demo applies.
BUGGY_LINE = "    if quantity > BULK_THRESHOLD:"
FIXED_LINE = "    if quantity >= BULK_THRESHOLD:"
PRICING = "shop/pricing.py"
TEST_COMMAND = "python -m unittest 2>&1"
EXPLORE_COMMAND = "ls -F && ls -F shop tests"
READ_COMMAND = f"cat -n {PRICING}"

SUB_AGENT_TASKS = (
    "Count the lines of each Python file in this project and say which is largest.",
    "List every function and method defined in the shop package, with line numbers.",
)
SEEDED_PREFIX = "This conversation continues"  # runtime/manager.py: seeded_message
NOTICE_PREFIX = "[phoenix notice] "  # core/messages.py SYSTEM_PREFIX: not the user's words
REVERT_MARK = "The user reverted the working tree"  # checkpoints/changes.py agent_message
INTERRUPTED_STARTS = ("Cancelled", "Skipped", "cancelled", "Tool call interrupted")
KERNEL_WORDS = ("traceback", "last cell", "my cell", "dataframe", "kernel", "variable")
SEED_SEPARATOR = "\n---\n"
FIXED_MARK = "`>` became `>=`"
MODE_UNRESTRICTED_MARK = "Mode changed to Unrestricted"
MODE_RESTRICTED_MARK = "Mode changed to Restricted"
_STEP = re.compile(r"^toolu_demo_([a-z0-9]+)_")
_FAILED_TEST = re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)", re.MULTILINE)
_RAN = re.compile(r"^Ran (\d+) tests?", re.MULTILINE)
_FRAME_ROW = re.compile(r"^- ([A-Za-z_][\w.]*): (?:[\w.]+\.)?DataFrame\b", re.MULTILINE)
_LAST_ERROR = re.compile(r"^Last exception(?: \(cell \[(\d+)\]\))?: (\w+): (.*)$", re.MULTILINE)
_TO_FLOAT = re.compile(r"could not convert string to float: '([^']*)'")
_FLOAT_OF_COLUMN = re.compile(r"float\(\s*(\w+)\[\s*['\"](\w+)['\"]\s*\]\s*\)")
_SUB_TASK = re.compile(r"^## Task (\d+): (.*)\nStatus: (\w+)\n", re.MULTILINE)


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(
        str(b.get("text", "")) for b in content or [] if isinstance(b, Mapping) and "text" in b
    )


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, Mapping)]


@dataclass(frozen=True)
class ToolOutcome:
    """What one of the demo's tool calls returned, as the next request reports it."""

    step: str
    content: str
    is_error: bool


@dataclass
class RequestView:
    """The facts of a request the script decides on."""

    is_sub_agent: bool
    continuation: bool
    first_reply: bool
    unrestricted: bool
    user_text: str  # every text block of the last user message, phoenix's notices included
    user_words: str = ""  # what the user said in it (no notices)
    images: list[Mapping[str, Any]] = field(default_factory=list)
    outcomes: list[ToolOutcome] = field(default_factory=list)
    unknown_results: int = 0
    tool_names_used: list[str] = field(default_factory=list)
    patches: list[tuple[str, str, str]] = field(default_factory=list)  # applied: path, old, new
    reverted: list[tuple[str, str, str]] = field(default_factory=list)  # applied, then reverted
    calls: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # step: latest input
    transcript: str = ""  # the messages since the last revert, as JSON: "was it fixed already?"

    @property
    def question(self) -> str:
        """The user's own words, without the summary a continued conversation starts with."""
        if self.user_words.startswith(SEEDED_PREFIX) and SEED_SEPARATOR in self.user_words:
            return self.user_words.rsplit(SEED_SEPARATOR, 1)[1]
        return self.user_words

    @property
    def interrupted(self) -> bool:
        """The last user message answers calls a cancel cut short (synthetic results)."""
        return any(o.is_error and o.content.startswith(INTERRUPTED_STARTS) for o in self.outcomes)

    @property
    def fixed_before(self) -> bool:
        return bool(self.patches) or FIXED_MARK in self.transcript

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> RequestView:
        messages = [m for m in body.get("messages", []) if isinstance(m, Mapping)]
        tool_names = {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, Mapping)}
        unrestricted = False
        used: list[str] = []
        calls: dict[str, Mapping[str, Any]] = {}
        patch_inputs: dict[str, Mapping[str, Any]] = {}
        applied: list[tuple[str, str, str]] = []
        reverted: list[tuple[str, str, str]] = []
        since_revert: list[Mapping[str, Any]] = []
        for message in messages:
            since_revert.append(message)
            for block in _blocks(message):
                kind = block.get("type")
                if kind == "tool_use":
                    used.append(str(block.get("name", "")))
                    step = _STEP.match(str(block.get("id", "")))
                    given = block.get("input")
                    if step is not None and isinstance(given, Mapping):
                        calls[step.group(1)] = given
                    if block.get("name") == "patch" and isinstance(given, Mapping):
                        patch_inputs[str(block.get("id"))] = given
                if kind == "tool_result" and not block.get("is_error"):
                    applied += _edits(patch_inputs.get(str(block.get("tool_use_id"))))
                if message.get("role") == "user" and kind == "text":
                    said = str(block.get("text", ""))
                    if MODE_UNRESTRICTED_MARK in said:
                        unrestricted = True
                    if MODE_RESTRICTED_MARK in said:
                        unrestricted = False
                    if said.startswith(NOTICE_PREFIX) and REVERT_MARK in said:
                        # The files it names are back as they were: their patches are undone.
                        undone = [e for e in applied if _names_path(said, e[0])]
                        reverted += undone
                        applied = [e for e in applied if e not in undone]
                        since_revert = []
        last = _blocks(messages[-1]) if messages and messages[-1].get("role") == "user" else []
        texts = [str(b.get("text", "")) for b in last if b.get("type") == "text"]
        view = cls(
            # Sub-agents, and only they, are offered submit_result (tools/registry.py).
            is_sub_agent="submit_result" in tool_names,
            continuation=not body.get("tools"),
            first_reply=not any(m.get("role") == "assistant" for m in messages),
            unrestricted=unrestricted,
            user_text="\n".join(texts),
            user_words="\n".join(t for t in texts if not t.startswith(NOTICE_PREFIX)),
            images=[b for b in last if b.get("type") == "image"],
            tool_names_used=used,
            patches=applied,
            reverted=reverted,
            calls=calls,
            transcript=json.dumps(since_revert, ensure_ascii=False),
        )
        for block in last:
            if block.get("type") != "tool_result":
                continue
            match = _STEP.match(str(block.get("tool_use_id", "")))
            if match is None:
                view.unknown_results += 1
            else:
                view.outcomes.append(
                    ToolOutcome(match.group(1), _result_text(block), bool(block.get("is_error")))
                )
        return view

    def outcome(self, step: str) -> ToolOutcome | None:
        return next((o for o in self.outcomes if o.step == step), None)


def _edits(patch: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """(path, old, new) of each edit of a patch call's input."""
    if not isinstance(patch, Mapping):
        return []
    path = str(patch.get("path", ""))
    return [
        (path, str(edit.get("oldText", "")), str(edit.get("newText", "")))
        for edit in patch.get("patches") or []
        if isinstance(edit, Mapping)
    ]


def _names_path(notice: str, path: str) -> bool:
    """Whether a revert notice lists `path` among the files it put back."""
    path = path.removeprefix("./")
    return any(line.strip().endswith((f": {path}", f"/{path}")) for line in notice.splitlines())


class DemoScript:
    """Decides the demo's next turn from a request; one instance per server."""

    def __init__(self, *, pace: float = DEFAULT_PACE) -> None:
        self.pace = pace
        self._token = secrets.token_hex(3)  # tool ids stay unique across kernel restarts
        self._count = itertools.count(1)

    # -- building turns ---------------------------------------------------------------
    def _say(self, value: str) -> BlockSpec:
        return text(value, chunk=12, delay=self.pace)

    def _call(self, step: str, name: str, input: Mapping[str, Any]) -> BlockSpec:
        return tool_use(name, input, id=f"toolu_demo_{step}_{self._token}{next(self._count)}")

    def _bash(self, step: str, command: str) -> BlockSpec:
        return self._call(step, "bash", {"command": command})

    def _turn(self, *blocks: BlockSpec) -> Turn:
        return Turn(list(blocks))

    # -- the dispatcher ---------------------------------------------------------------
    def reply(self, request: FakeRequest) -> Turn:
        body = request.body if isinstance(request.body, Mapping) else {}
        view = RequestView.of(body)
        if view.continuation:
            return self._summary(view)
        if view.is_sub_agent:
            return self._sub_agent(view)
        if view.question.strip() or view.images:
            # A new message wins over the results of calls it interrupted (a cancel):
            # those say "Cancelled…", not what the step the script was on returned.
            return self._answer_user(view)
        if view.outcomes:
            return self._next_step(view)
        if view.unknown_results:
            return self._turn(
                self._say(
                    f"{LABEL} Those tool calls were interrupted before I saw their results. "
                    "Send me a new message to carry on."
                )
            )
        return self._answer_user(view)

    def _opening(self, view: RequestView) -> str:
        """The disclaimer, once per conversation: in its first reply only."""
        return INTRO if view.first_reply else ""

    def _lead(self, view: RequestView, sep: str = " ") -> str:
        """The disclaimer (first reply) and, after a cancel, that the script starts over."""
        parts = [self._opening(view)]
        if view.interrupted:
            parts.append(
                "(You cancelled my last step before it finished; I start again from your message.)"
            )
        lead = sep.join(p for p in parts if p)
        if not lead:
            return ""
        # The disclaimer is its own paragraph: run into the answer it read as part of it
        # (the first reply of a continued conversation).
        return lead + ("\n\n" if parts[0] else sep)

    # -- a new user message -----------------------------------------------------------
    def _answer_user(self, view: RequestView) -> Turn:
        said = view.question.lower()
        if view.images:
            return self._describe_images(view)
        if "change" in said:
            return self._turn(self._say(f"{self._lead(view)}{self._what_changed(view)}"))
        if any(word in said for word in KERNEL_WORDS):
            return self._turn(
                self._say(
                    f"{self._lead(view, chr(10) * 2)}I'll look at your kernel rather than "
                    "guess: first which variables it holds. (Reading it changes nothing: "
                    "phoenix reads a disposable copy of the kernel.)"
                ),
                self._call("vars", "inspect_variables", {}),
            )
        if cell_fix.asks_for_cell_fix(said):
            return self._turn(*cell_fix.opening(self._lead(view), self._say, self._call))
        if any(word in said for word in ("sub-agent", "subagent", "sub agent", "parallel")):
            return self._turn(
                self._say(
                    f"{self._lead(view)}I'll split this into two independent read-only "
                    "investigations and run them as sub-agents in parallel."
                ),
                self._call(
                    "spawn", "spawn_agents", {"tasks": [{"task": t} for t in SUB_AGENT_TASKS]}
                ),
            )
        if any(word in said for word in ("fix", "fail", "test", "bug", "broken")):
            stance = (
                "I have write access, but I look before I touch anything."
                if view.unrestricted
                else "I'm in Restricted mode, so everything I run is read-only."
            )
            return self._turn(
                self._say(
                    f"{self._lead(view, chr(10) * 2)}I'll start by looking around the project. "
                    + stance
                ),
                self._bash("explore", EXPLORE_COMMAND),
            )
        return self._turn(
            self._say(
                f"{self._lead(view)}I'm a scripted stand-in for Claude and can only play a "
                "few scenes: ask me to *fix the failing tests* (in the sample project), to "
                "*look at the traceback of your last cell* (the tour's `orders` DataFrame), "
                "attach an image with `--image`, ask me to *use sub-agents*, or ask what I "
                "changed. "
                "Set ANTHROPIC_API_KEY and start a new conversation to talk to the real model."
            )
        )

    @staticmethod
    def _what_changed(view: RequestView) -> str:
        """From the conversation's real history: the patches that applied and still stand."""
        if view.patches:
            parts = [_describe_patch(path, old, new) for path, old, new in view.patches]
            effect = (
                ", so the 5% bulk discount now starts at 10 items, as the docstring promises"
                if any(new.rstrip() == FIXED_LINE.rstrip() for _, _, new in view.patches)
                else ""
            )
            return f"{'; '.join(parts)}{effect}."
        if view.reverted:
            parts = [_describe_patch(path, old, new) for path, old, new in view.reverted]
            files = ", ".join(sorted({f"`{path}`" for path, _, _ in view.reverted}))
            return (
                f"{'; '.join(parts)} — but you reverted that, so {files} is back as it was: "
                "as things stand I have changed nothing. Ask me to fix the tests again if "
                "you want the change back."
            )
        if not view.fixed_before:
            return "I have not changed any file in this conversation."
        return (
            f"In `{PRICING}`, {FIXED_MARK} on one line, so the 5% bulk discount now starts at "
            "10 items, as the docstring promises; the failing tests pass and nothing else changed."
        )

    def _describe_images(self, view: RequestView) -> Turn:
        lines = [describe_image(block) for block in view.images]
        shown = "\n".join(f"- {line}" for line in lines)
        return self._turn(
            self._say(
                f"{self._lead(view)}I received {len(lines)} image(s):\n\n{shown}\n\n"
                "The demo model cannot look at pictures; Claude would describe the figure "
                "here. What you saw is real, though: phoenix rendered the figure to PNG, "
                "downsized it if needed and sent it in the request."
            )
        )

    # -- the fix-the-tests screenplay ---------------------------------------------------
    def _next_step(self, view: RequestView) -> Turn:
        for step, handler in (
            ("explore", self._after_explore),
            ("tests", self._after_first_tests),
            ("search", self._after_search),
            ("read", self._after_read),
            ("upgrade", self._after_upgrade),
            ("patch", self._after_patch),
            ("retest", self._after_retest),
            ("spawn", self._after_spawn),
            ("vars", self._after_vars),
            ("frame", self._after_frame),
            ("khist", self._after_kernel_history),
            ("trypy", self._after_try),
            ("propose", self._after_propose),
            ("cellhist", self._after_cell_history),
            ("celledit", self._after_cell_edit),
        ):
            outcome = view.outcome(step)
            if outcome is not None:
                return handler(view, outcome)
        return self._turn(self._say(f"{LABEL} Done."))

    def _after_cell_history(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        blocks = cell_fix.after_history(outcome.content, outcome.is_error, self._say, self._call)
        return self._turn(*blocks)

    def _after_cell_edit(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        return self._turn(*cell_fix.after_edit(outcome.content, outcome.is_error, self._say))

    def _after_explore(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        return self._turn(
            self._say(
                "A small `shop` package with `unittest` tests. Running tests only reads "
                "files, so the sandbox allows it:"
            ),
            self._bash("tests", TEST_COMMAND),
        )

    def _after_first_tests(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        report = outcome.content
        failed = _FAILED_TEST.findall(report)
        ran = _RAN.search(report)
        if not failed and ran and int(ran.group(1)) > 0 and "OK" in report:
            return self._turn(
                self._say(
                    f"All {ran.group(1)} tests pass: there is nothing to fix here. (The sample "
                    "project in `notebooks/sample_project/` ships with a failing test; the "
                    "notebooks copy it to `scratch/` first.)"
                )
            )
        if not failed:
            return self._turn(
                self._say(
                    "I found no failing unittest test here, so my script has nothing to fix. "
                    "The demo is written for `notebooks/sample_project/`: start a new "
                    "conversation with `--cwd` pointing at a copy of it."
                )
            )
        names = ", ".join(f"`{name}`" for name, _ in failed)
        return self._turn(
            self._say(
                f"{len(failed)} test(s) fail: {names}. Both expect a discount on exactly 10 "
                "items. Let me find where the bulk discount is computed."
            ),
            self._call(
                "search",
                "keyword_search",
                {
                    "query": "where the bulk discount is computed",
                    "search_terms": ["bulk", "BULK_THRESHOLD"],
                },
            ),
        )

    def _after_search(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        return self._turn(
            self._say(f"Everything points at `{PRICING}`. Reading it:"),
            self._bash("read", READ_COMMAND),
        )

    def _after_read(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        if BUGGY_LINE.strip() not in outcome.content:
            return self._turn(
                self._say(
                    f"`{PRICING}` does not contain the line my script expects "
                    f"(`{BUGGY_LINE.strip()}`), so I stop here rather than guess."
                )
            )
        found = (
            "Found it: the docstring says *10 or more* items get 5% off, but the code tests "
            "`quantity > BULK_THRESHOLD`, so exactly 10 items pay full price. The fix is "
            "`>=`."
        )
        if view.unrestricted:
            return self._turn(self._say(found + " I already have write access."), self._patch())
        return self._turn(
            self._say(found + " I'm read-only in Restricted mode, so I ask you for write access."),
            self._call(
                "upgrade",
                "request_mode_upgrade",
                {
                    "reason": f"Change one line of {PRICING} (`>` to `>=`) so the bulk discount "
                    "starts at 10 items, then re-run the tests."
                },
            ),
        )

    def _patch(self) -> BlockSpec:
        return self._call(
            "patch",
            "patch",
            {
                "path": PRICING,
                "patches": [{"operation": "replace", "oldText": BUGGY_LINE, "newText": FIXED_LINE}],
            },
        )

    def _after_upgrade(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        if outcome.content.startswith(("Approved", "Already")):
            return self._turn(self._say("Thanks. Applying the one-line fix:"), self._patch())
        return self._turn(
            self._say(
                "Understood: I stay read-only and change nothing. The fix I would make, in "
                f"`{PRICING}`:\n\n```diff\n-{BUGGY_LINE}\n+{FIXED_LINE}\n```\n\nAsk again "
                "(or apply it yourself) whenever you like."
            )
        )

    def _after_patch(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        if outcome.is_error:
            return self._turn(
                self._say(f"The patch did not apply:\n\n{_clip(outcome.content)}\n\nI stop here.")
            )
        return self._turn(
            self._say("Patched. Re-running the tests:"), self._bash("retest", TEST_COMMAND)
        )

    def _after_retest(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        report = outcome.content
        ran = _RAN.search(report)
        if _FAILED_TEST.search(report) or not ran or "OK" not in report:
            return self._turn(
                self._say(f"The tests still fail after the patch:\n\n```\n{_clip(report)}\n```")
            )
        return self._turn(
            self._say(
                f"All {ran.group(1)} tests pass now.\n\n**What was wrong:** `line_total` in "
                f"`{PRICING}` gave the bulk discount only *above* 10 items (`>`), while its "
                f"docstring and the tests say *10 or more*.\n\n**What I changed:** {FIXED_MARK} "
                "on that one line. Nothing else was touched."
            )
        )

    def _after_spawn(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        return self._turn(
            self._say(
                "Both sub-agents reported back (they worked read-only, in the sandbox); "
                "their reports are in the spawn_agents result above, so I list only what "
                "each did:\n\n" + _sub_agent_tasks(outcome.content)
            )
        )

    # -- the kernel-tools screenplay ------------------------------------------------------
    def _after_vars(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        frames = _FRAME_ROW.findall(outcome.content)
        if outcome.is_error:
            return self._turn(
                self._say(f"I cannot read the kernel here:\n\n{_quote(outcome.content)}")
            )
        if not frames:
            return self._turn(
                self._say("There is no DataFrame in the kernel; reading what it ran instead:"),
                self._call("khist", "kernel_history", {"last": 5}),
            )
        name = frames[0]
        return self._turn(
            self._say(f"`{name}` is a DataFrame. Its columns, dtypes and first rows:"),
            self._call("frame", "inspect_variables", {"names": [name]}),
        )

    def _after_frame(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        return self._turn(
            self._say(
                "Now what the kernel actually ran, and the last error with each frame's "
                "local variables:"
            ),
            self._call("khist", "kernel_history", {"last": 5}),
        )

    def _after_kernel_history(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        report = outcome.content
        error = _LAST_ERROR.search(report)
        if error is None:
            return self._turn(
                self._say(
                    "Your kernel has raised no exception so far, so there is no traceback to "
                    "explain. (In the tour, the cell that computes `total` raises one.)"
                )
            )
        cell, kind, message = error.groups()
        bad = _TO_FLOAT.search(message)
        column = _FLOAT_OF_COLUMN.search(report)
        frame = _frame_name(view)
        source = _cell_source(report, cell)
        if bad is None or column is None or frame is None or source is None or "," not in bad[1]:
            return self._turn(
                self._say(
                    f"The last error is `{kind}: {message}`. My script only knows the tour's "
                    "decimal-comma price, so I stop here rather than guess; Claude would "
                    "go on from the traceback."
                )
            )
        name = column.group(2)
        code = _price_fix(frame, name, source)
        return self._turn(
            self._say(
                f"Found it: `{kind}: {message}`. The traceback's locals show the row being "
                f"priced: its `{name}` is the string `'{bad[1]}'`, written with a decimal "
                f"comma, so `float()` refuses it: `{frame}` holds `{name}` as text, "
                "not numbers. Let me try the fix on a disposable copy of your "
                "kernel first (`run_python`; your variables stay as they are):"
            ),
            self._call("trypy", "run_python", {"code": f"{code}\nprint({frame})"}),
        )

    def _after_try(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        code = str(view.calls.get("trypy", {}).get("code", ""))
        proposal = code.rsplit("\nprint(", 1)[0]
        frame = _frame_name(view) or "the DataFrame"
        if outcome.is_error:
            said = (
                "The scratchpad could not try it here:\n\n"
                f"{_quote(outcome.content)}\n\nSo the cell I propose is untried:"
            )
        else:
            said = (
                "It works on the copy (your kernel is untouched):\n\n"
                f"{_quote(outcome.content)}\n\nI propose it as a cell for you to run:"
            )
        return self._turn(
            self._say(said),
            self._call(
                "propose",
                "propose_cell",
                {
                    "code": proposal,
                    "explanation": (
                        f"Reads the decimal commas in `{frame}`'s prices as points, makes "
                        "the column numeric, then computes `total` again"
                        + ("." if outcome.is_error else " (tried first with run_python).")
                    ),
                },
            ),
        )

    def _after_propose(self, view: RequestView, outcome: ToolOutcome) -> Turn:
        if outcome.is_error:
            return self._turn(
                self._say(f"I could not propose the cell:\n\n{_quote(outcome.content)}")
            )
        return self._turn(
            self._say(
                "**What was wrong:** one price was typed with a decimal comma, so the "
                "column is text and `float()` failed on it.\n\n**What to do:** the proposed "
                "cell below this one fixes the column and computes `total`. It is not run: "
                "read it, then run it yourself — I never change your kernel's state."
            )
        )

    # -- sub-agents and continuation ------------------------------------------------------
    def _sub_agent(self, view: RequestView) -> Turn:
        done = view.outcome("subwork")
        if done is not None:
            return self._turn(
                self._call(
                    "submit",
                    "submit_result",
                    {
                        "result": f"{LABEL}\n{_trim(done.content, 1200)}",
                        "success": not done.is_error,
                    },
                )
            )
        task = view.user_text.lower()
        if "function" in task or "method" in task:
            command = "grep -rn 'def ' shop"
        elif "line" in task:
            command = "find . -name '*.py' -not -path '*/.*' | sort | xargs wc -l"
        else:
            command = "ls -R"
        return self._turn(
            self._say(f"{LABEL} Sub-agent: one read-only command answers this."),
            self._bash("subwork", command),
        )

    def _summary(self, view: RequestView) -> Turn:
        fixed = view.fixed_before
        return self._turn(
            self._say(
                f"{LABEL} Continuation summary (scripted).\n"
                "1. Task: fix the failing tests of the `shop` sample project — "
                + (f"done: {FIXED_MARK}; all tests pass." if fixed else "not finished.")
                + f"\n2. Key file: `{PRICING}` (`line_total`, bulk discount from 10 items).\n"
                "3. Next: "
                + (
                    "nothing required; ask a follow-up question if you like."
                    if fixed
                    else "ask me to fix the failing tests."
                )
            )
        )


def _describe_patch(path: str, old: str, new: str) -> str:
    """'In `a.py` I changed one line: `>` became `>=`' — the words that differ."""
    before, after = old.split(), new.split()
    change = ""
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after).get_opcodes():
        if tag != "equal":
            change = f"`{' '.join(before[i1:i2]) or '∅'}` became `{' '.join(after[j1:j2]) or '∅'}`"
            break
    lines = max(old.count("\n"), new.count("\n")) + 1
    what = "one line" if lines == 1 else f"{lines} lines"
    return f"In `{path}` I changed {what}" + (f": {change}" if change else "")


def _sub_agent_tasks(content: str) -> str:
    """One line per task of spawn_agents' result: its number, status and task, without
    the report the record already shows in the tool's result."""
    found = list(_SUB_TASK.finditer(content))
    if not found:
        return "(no task lines in the result)"
    return "\n".join(
        f"- **Task {n}** ({status}): {task}" for n, task, status in (m.groups() for m in found)
    )


def _quote(value: str, limit: int = 800) -> str:
    """A tool's output as a fenced block: Markdown in it is shown, never rendered."""
    body = _trim(value, limit)
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}text\n{body}\n{fence}"


def _frame_name(view: RequestView) -> str | None:
    names = view.calls.get("frame", {}).get("names")
    return str(names[0]) if isinstance(names, list) and names else None


def _cell_source(report: str, cell: str | None) -> str | None:
    """The source of cell `In [cell]` from a kernel_history report."""
    if cell is None:
        return None
    # A header is `In [9]:` under nbclient and `In [9] (cell <id>…):` wherever the front
    # end sends cell ids (JupyterLab, Notebook 7): kernel_history's `cell_marks`.
    head = r"In \[{}\](?: \(cell [^\n]*\))?:\n"
    this, any_cell = head.format(re.escape(cell)), head.format(r"\d+")
    match = re.search(
        rf"^{this}(.*?)(?=^{any_cell}|^  \[\w+\]|\Z)", report, re.MULTILINE | re.DOTALL
    )
    if match is None:
        return None
    source = match.group(1).strip()
    return source or None


def _price_fix(frame: str, column: str, failing_cell: str) -> str:
    """The failing cell again (without `%%phoenix_fails`), after the column's decimal
    commas become points."""
    failing_cell = cell_fix.without_fails_magic(failing_cell)
    return (
        f'{frame}["{column}"] = (\n'
        f'    {frame}["{column}"].astype(str).str.replace(",", ".", regex=False).astype(float)\n'
        f")\n{failing_cell}"
    )


def _trim(value: str, limit: int) -> str:
    """Like `_clip` for command output: a first line's indent is part of a column."""
    value = value.strip("\n").rstrip()
    return value if len(value) <= limit else value[:limit] + " …"


def _clip(value: str, limit: int = 800) -> str:
    value = value.strip()
    return value if len(value) <= limit else value[:limit] + " …"


def describe_image(block: Mapping[str, Any]) -> str:
    """One line about an image block, decoded for real (the demo cannot 'see' it)."""
    given = block.get("source")
    source: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    media_type = str(source.get("media_type", "image"))
    try:
        raw = base64.b64decode(str(source.get("data", "")), validate=True)
    except ValueError:
        return f"{media_type}, undecodable data"
    try:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as image:
            width, height = image.size
    except (OSError, ValueError):  # UnidentifiedImageError is an OSError
        return f"{media_type}, {len(raw) / 1024:.0f} KB (not a readable image)"
    return f"{width}×{height} px {media_type}, {len(raw) / 1024:.0f} KB"


def pace_from_env(environ: Mapping[str, str] | None = None) -> float:
    """`PHOENIX_DEMO_PACE` (seconds between text chunks); bad values fall back to the default."""
    raw = (os.environ if environ is None else environ).get(PACE_ENV, "")
    try:
        pace = float(raw) if raw else DEFAULT_PACE
    except ValueError:
        return DEFAULT_PACE
    return min(max(pace, 0.0), 0.5)


def demo_server(*, pace: float | None = None) -> FakeAnthropic:
    """A demo server, not yet started (use it as a context manager)."""
    script = DemoScript(pace=pace_from_env() if pace is None else pace)
    return FakeAnthropic(default=script.reply)


def start_demo_server(*, pace: float | None = None) -> FakeAnthropic:
    """The started demo server the runtime uses for `--model demo`; call `.stop()` when done."""
    return demo_server(pace=pace).start()
