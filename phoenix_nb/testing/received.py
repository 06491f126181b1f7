"""What a model server received, read back into one neutral form, for tests only.

A request body in the Messages API's shape (Anthropic, compatible servers, Bedrock,
Vertex) or Chat Completions' shape becomes a `Received`: the tool calls the history
holds, each call's `Answer` (its text, error flag and images) as the model reads it,
the user's own words and the thinking blocks sent back. Tests state once what the
agent meant and hold every wire format to it. The two formats differ by design in
three places, which are read here and nowhere else: Chat Completions marks an error
with a leading "Error: ", carries a tool's images in a user message after the tool
messages (each run introduced by "(images from tool call <id>)"), and has no thinking.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer", "Received", "chat_received", "messages_received"]

_IMAGES_FROM = "(images from tool call "


@dataclass(frozen=True)
class Answer:
    """A tool call's answer as the model receives it."""

    call: str
    text: str
    is_error: bool = False
    images: tuple[str, ...] = ()  # base64 data


@dataclass
class Received:
    """One request's history, read back (see the module docstring)."""

    calls: list[str] = field(default_factory=list)  # ids, in the order they were sent
    # (id, tool name, input) of each call, as the history sent back gives them
    named: list[tuple[str, str, Any]] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)  # in the order they were sent
    user_texts: list[str] = field(default_factory=list)  # user words, not tool answers
    thinking: list[Mapping[str, Any]] = field(default_factory=list)  # blocks sent back

    def by_call(self) -> dict[str, Answer]:
        return {a.call: a for a in self.answers}

    def problems(self) -> list[str]:
        """How the answers break "every call answered exactly once" (empty: they don't)."""
        answered = [a.call for a in self.answers]
        out = [
            f"{c} answered {answered.count(c)} times" for c in self.calls if answered.count(c) != 1
        ]
        out += [f"{a} answers no call" for a in answered if a not in self.calls]
        return out


def _block_text(blocks: Sequence[Any]) -> str:
    return "\n".join(
        str(b.get("text")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"
    )


def messages_received(body: Mapping[str, Any]) -> Received:
    """A Messages API request body (Anthropic, compatible servers, Bedrock, Vertex)."""
    out = Received()
    for message in body["messages"]:
        content = message["content"]
        blocks: list[Any] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        if message["role"] == "assistant":
            uses = [b for b in blocks if b["type"] == "tool_use"]
            out.calls += [b["id"] for b in uses]
            out.named += [(b["id"], b["name"], b["input"]) for b in uses]
            out.thinking += [b for b in blocks if b["type"] in ("thinking", "redacted_thinking")]
            continue
        for block in blocks:
            if block["type"] == "tool_result":
                inner = block.get("content", "")
                inner_blocks: list[Any] = (
                    [{"type": "text", "text": inner}] if isinstance(inner, str) else inner
                )
                pictures = tuple(
                    str(b["source"]["data"]) for b in inner_blocks if b["type"] == "image"
                )
                out.answers.append(
                    Answer(
                        block["tool_use_id"],
                        _block_text(inner_blocks),
                        bool(block.get("is_error")),
                        pictures,
                    )
                )
            elif block["type"] == "text":
                out.user_texts.append(str(block["text"]))
    return out


def chat_received(body: Mapping[str, Any]) -> Received:
    """A Chat Completions request body. Raises AssertionError where the shape breaks the
    format's rules phoenix relies on (a tool message holds text; reasoning never goes back)."""
    out = Received()
    answers: dict[str, Answer] = {}
    order: list[str] = []
    for message in body["messages"]:
        role = message["role"]
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                out.calls.append(call["id"])
                function = call["function"]
                given = json.loads(function["arguments"] or "{}")
                out.named.append((call["id"], function["name"], given))
            if "reasoning_content" in message:
                raise AssertionError("reasoning_content was sent back")
        elif role == "tool":
            said = message["content"]
            if not isinstance(said, str):
                raise AssertionError(f"a tool message holds text, not {type(said).__name__}")
            error = said.startswith("Error: ")
            call = message["tool_call_id"]
            answers[call] = Answer(call, said.removeprefix("Error: ") if error else said, error)
            order.append(call)
        elif role == "user":
            content = message["content"]
            parts: list[Any] = (
                [{"type": "text", "text": content}] if isinstance(content, str) else content
            )
            current: str | None = None
            for part in parts:
                if part["type"] == "text" and part["text"].startswith(_IMAGES_FROM):
                    current = part["text"].removeprefix(_IMAGES_FROM).rstrip(")")
                elif part["type"] == "image_url" and current is not None:
                    data = part["image_url"]["url"].split("base64,", 1)[1]
                    old = answers[current]
                    answers[current] = Answer(old.call, old.text, old.is_error, (*old.images, data))
                elif part["type"] == "text":
                    current = None
                    out.user_texts.append(str(part["text"]))
    out.answers = [answers[c] for c in order]
    return out
