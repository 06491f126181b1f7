"""A long conversation seeded straight into a kernel's store, for tests and benchmarks.

`SEED` is code to run in the kernel: it defines `_seed(slug, n)`, which creates a
conversation of `n` stored messages in a realistic mix (a question, an answer
calling a tool, its result, a final answer; usage on every answer) without
asking any model, and returns its slug. The messages are stored 100 to a journal
line: the store writes a line per turn's few messages, and one line of 10,000 would
be one multi-megabyte JSON document to decode where the product never has one.
"""

SEED = """
import json as _json
from phoenix_nb.core.codec import to_json as _to_json
from phoenix_nb.core.stored import MessageKind as _K, StoredMessage as _M
from phoenix_nb.core.values import TextBlock as _T, ToolUseBlock as _U, Usage as _Usage
from phoenix_nb.notebook.session import get_session as _gs

def _seed(slug, n):
    phoenix = _gs(get_ipython()).phoenix
    conv = phoenix.create(slug=slug)
    specs = []
    usage = _Usage(input_tokens=1200, output_tokens=80, cache_read_input_tokens=9000)
    i = 0
    while len(specs) < n:
        i += 1
        call = f"toolu_seed_{i:06d}"
        specs.append(_M(_K.USER, {"text": f"Question {i}: what does module {i} do?",
                                  "images": []}))
        blocks = (_T(f"Let me look at module {i}."), _U(call, "bash", {"command": f"cat m{i}.py"}))
        specs.append(_M(_K.AGENT, {"blocks": _to_json(blocks), "stop_reason": "tool_use"},
                        None, usage))
        result = f"def f{i}():\\n    return {i}\\n"
        specs.append(_M(_K.TOOL, {"tool_use_id": call, "content": result, "is_error": False,
                                  "images": []}))
        answer = (_T(f"Module {i} defines f{i}, which returns {i}."),)
        specs.append(_M(_K.AGENT, {"blocks": _to_json(answer), "stop_reason": "end_turn"},
                        None, usage))
    for start in range(0, n, 100):  # a journal line per 100, as turns write a few each
        phoenix.store.append_messages(conv.id, specs[start : min(n, start + 100)])
    return conv.slug
"""
