"""The quickstart end to end against a local Anthropic-compatible server: an unknown
model name, no key, no prices, a server that refuses prompt caching and has no models
endpoint (Ollama-like). The scripted demo conversation is served by that server, so
what differs from the offline quickstart is only what phoenix must cope with."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from phoenix_nb.demo.screenplay import DemoScript
from phoenix_nb.testing.compat_server import CompatServer
from tests.test_quickstart import joined, offline_env, phoenix_records, run, workdir  # noqa: F401

LOCAL_MODEL = "llama3.3:70b-instruct-local"


def test_quickstart_on_a_local_server_with_an_unknown_model_says_price_unknown(
    workdir: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    with CompatServer(default=DemoScript(pace=0).reply) as server:
        env = offline_env(tmp_path / "home")
        env.update(ANTHROPIC_BASE_URL=server.base_url, PHOENIX_MODEL=LOCAL_MODEL)
        run(
            [
                sys.executable,
                "-m",
                "jupyter",
                "nbconvert",
                "--to",
                "notebook",
                "--execute",
                "quickstart.ipynb",
                "--output",
                "quickstart.out.ipynb",
            ],
            workdir,
            env,
        )
        assert server.refused == ["caching"], "refused once, then never sent again"
        assert server.requests, "the local server answered the conversation"
        assert all(r.body["model"] == LOCAL_MODEL for r in server.requests)
    notebook = json.loads((workdir / "quickstart.out.ipynb").read_text())
    records = phoenix_records(notebook)
    assert {r["conversation"]["model"] for r in records} == {LOCAL_MODEL}
    assert all(r["usage"]["priced"] is False for r in records)
    outputs = [o for c in notebook["cells"] for o in c.get("outputs", [])]
    fallbacks = "".join(
        joined(o["data"].get(kind, ""))
        for o in outputs
        if "data" in o
        for kind in ("text/plain", "text/markdown", "text/html")
    )
    assert "price unknown" in fallbacks
    assert "$0.00" not in fallbacks and "$0.00" not in json.dumps(records)
    stdout = "".join(joined(o.get("text", "")) for o in outputs)
    assert "tests of the copy: OK" in stdout, "the agent's fix worked through the local server"
    assert "rejected prompt caching" in stdout
    assert stdout.count("rejected prompt caching") == 1
    assert "conservative default" in stdout, "%phoenix status says where the window came from"
