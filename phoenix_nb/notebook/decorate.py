"""The runtime's record as the notebook shows it (pure: no IPython, no I/O).

Each tool group's words ("ran 2 commands") and openness are computed here once, so
the labextension shows exactly what the HTML, Markdown and text fallbacks say;
reasoning is dropped when configured; with the conversation's history, bounded
thumbnails of its stored images are added. Kept apart from `cell.py` so a child
process can decorate a whole conversation's record (`whole_record.py`) without
importing IPython.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phoenix_nb.core.stored import MessageLike
from phoenix_nb.notebook._render.view import group_open, group_title, state_line, with_call_status
from phoenix_nb.notebook.thumbnails import ThumbnailCache, with_thumbnails

__all__ = ["decorate_record"]


def decorate_record(
    payload: dict[str, Any],
    *,
    show_thinking: bool,
    history: Sequence[MessageLike] | None,
    thumbnails: ThumbnailCache,
) -> dict[str, Any]:
    """`payload` decorated for display; thumbnails made (or found) in `thumbnails`."""
    if history:
        payload = with_thumbnails(payload, history, thumbnails)
    cycles = payload.get("cycles", [])
    if not show_thinking:
        cycles = _without_reasoning(cycles)
    out = []
    for cycle in cycles:
        steps = []
        for step in cycle.get("steps", []):
            groups = step.get("tool_groups")
            if groups:
                step = {
                    **step,
                    "tool_groups": [
                        {
                            **g,
                            "label": group_title(g),
                            "open": group_open(g),
                            "calls": with_call_status(g),
                        }
                        for g in groups
                    ],
                }
            steps.append(step)
        out.append({**cycle, "steps": steps})
    decorated = {**payload, "cycles": out}
    conv = payload.get("conversation")
    if isinstance(conv, Mapping) and isinstance(conv.get("state"), Mapping):
        state = {**conv["state"]}
        state["label"] = state_line(state, decorated)
        decorated["conversation"] = {**conv, "state": state}
    return decorated


def _is_reasoning(step: Mapping[str, Any]) -> bool:
    item = step.get("item")
    is_ai = step.get("kind") == "ai"
    return is_ai and isinstance(item, Mapping) and item.get("type") == "reasoning"


def _without_reasoning(cycles: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Drop the model's reasoning from the record (`c.Phoenix.show_thinking = False`):
    a reasoning-only step goes; a step that also holds tool calls keeps them."""
    out = []
    for cycle in cycles:
        steps = []
        for step in cycle.get("steps", []):
            if _is_reasoning(step):
                if not step.get("tool_groups"):
                    continue
                step = {**step, "item": None}
            steps.append(step)
        out.append({**cycle, "steps": steps})
    return out
