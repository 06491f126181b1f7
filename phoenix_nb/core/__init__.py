"""The pure Bedrock core: states, events, effects, `transition`, message chain,
request-cycle projection and model registry. No I/O, asyncio, clock or
randomness anywhere below this package (an import-linter contract holds it).

The contract: `transition.transition(state, context, event)` returns a
`Transition(state, effects)` or a `Rejection(message)` that changes nothing;
the runtime feeds it `events`, executes its `effects` in order and persists
`states` through `codec` (every value, state, event and effect to JSON and
back). `messages` turns the stored history into API messages, `requests`
shapes a request from it, `cycles` projects it into the record
(docs/record-format.md), `displays` and `changes` type what a tool call shows
and changed, `marks` how text that hides characters is shown. The user's model
and price tables are values (`prices.ModelTables`) carried in by the context
(`ConvContext.tables`) and the record header.

Its face is its modules, listed below and pinned by
tests/runtime/test_front_door.py.
"""

__all__ = [
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
]
