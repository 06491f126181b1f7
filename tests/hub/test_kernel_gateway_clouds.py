"""A real kernel whose policy names a Bedrock or Vertex gateway: the kernel holds only
its user's Hub token (no AWS or Google credential at all), its provider is the cloud's
own client pointed at the gateway, and the upstream receives the gateway's SigV4
signature (recomputed by the fake with the gateway's keys) or the gateway's Google token.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from phoenix_nb.core.values import Usage
from phoenix_nb.hub import AuditLog, Gateway
from phoenix_nb.hub.gateway import _from_environment
from phoenix_nb.hub.upstreams import GoogleAuth, SigV4Auth, UpstreamAuth, wire_for
from phoenix_nb.policy import parse_policy
from phoenix_nb.testing import Turn, text
from phoenix_nb.testing.fake_bedrock import FakeBedrock
from phoenix_nb.testing.fake_vertex import FakeVertex
from phoenix_nb.testing.hub import GatewayServer, TokenTable
from tests.notebook.kernel_harness import Kernel, loaded_kernel

pytestmark = pytest.mark.timeout(180)

HUB_TOKEN = "hubtoken-of-phx-a-cloud-0123456789"
AWS_KEYS = ("AKIDGATEWAYKERNEL01", "gateway-kernel-secret-0123456789")
MODELS = {
    "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "vertex": "claude-sonnet-4-5@20250929",
}
# what a kernel would need to reach a cloud itself (AWS_CA_BUNDLE and such are not)
CLOUD_VARIABLES = {
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_PROJECT_ID",
}
POLICY = """\
[gateway]
url = "{url}"
upstream = "{kind}"

[models]
allowed = ["*claude-sonnet-4-5*"]
default = "{model}"
"""


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """The gateway's service environment while its credential chain is read."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module", params=["bedrock", "vertex"])
def cloud(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Kernel, Any, GatewayServer]]:
    kind = request.param
    root = tmp_path_factory.mktemp(f"kernel-{kind}")
    answer = Turn([text(f"answered by {kind} via the gateway")], usage=Usage(1000, 100))
    fake: Any
    auth: UpstreamAuth
    if kind == "bedrock":
        fake = FakeBedrock(aws_keys=AWS_KEYS, default=answer).start()
        with _environment(AWS_ACCESS_KEY_ID=AWS_KEYS[0], AWS_SECRET_ACCESS_KEY=AWS_KEYS[1]):
            auth = SigV4Auth("eu-central-1")
        upstream, wire = fake.base_url, wire_for("bedrock")
    else:
        fake = FakeVertex(default=answer).start()
        with _environment(GOOGLE_APPLICATION_CREDENTIALS=str(fake.credentials_file(root))):
            auth = GoogleAuth()
        upstream = fake.vertex_url
        wire = wire_for("vertex", project="admins-project", region="europe-west1")
    try:
        gateway = Gateway(
            upstream=upstream,
            policy=None,
            auth=TokenTable({HUB_TOKEN: "phx-a"}),
            audit=AuditLog(root / "audit.jsonl"),
            upstream_auth=auth,
            wire=wire,
        )
        with GatewayServer(gateway) as server:
            policy_file = root / "policy.toml"
            policy_file.write_text(POLICY.format(url=server.url, kind=kind, model=MODELS[kind]))
            gateway.policy = parse_policy(policy_file.read_text(), str(policy_file))
            env = {
                "PHOENIX_POLICY": str(policy_file),
                "JUPYTERHUB_API_TOKEN": HUB_TOKEN,
                "ANTHROPIC_API_KEY": "",
                "ANTHROPIC_BASE_URL": "",
                "PHOENIX_MODEL": "",
            }
            with loaded_kernel(root, "", extra_env=env) as kernel:
                yield kind, kernel, fake, server
    finally:
        fake.stop()


def test_a_turn_reaches_the_cloud_with_the_gateways_credentials_only(
    cloud: tuple[str, Kernel, Any, GatewayServer],
) -> None:
    kind, kernel, fake, server = cloud
    held = kernel.eval(f"sorted(set(__import__('os').environ) & set({sorted(CLOUD_VARIABLES)!r}))")
    assert held == [], "the kernel holds no cloud credential or setting"
    turn = kernel.finish_turn(kernel.submit("%%phoenix\nhello"), timeout=90)
    assert turn.status == "ok", turn.error()
    record = json.dumps(turn.last_bundle())
    assert f"answered by {kind} via the gateway" in record, record[-1500:]
    [wire] = fake.wire
    model = MODELS[kind]
    if kind == "bedrock":
        assert wire.path == f"/model/{model}/invoke-with-response-stream"
        assert fake.refused_signatures == 0  # signed with the gateway's keys, or 403
    else:
        assert wire.path == (
            "/v1/projects/admins-project/locations/europe-west1/publishers/anthropic/"
            f"models/{model}:streamRawPredict"
        )
        assert fake.token_requests == 1  # the gateway's own token (else 401)
    said = json.dumps(wire.headers)
    assert HUB_TOKEN not in said and "x-phoenix" not in said
    deadline = time.monotonic() + 30
    while not (lines := list(server.gateway.audit.lines())) and time.monotonic() < deadline:
        time.sleep(0.01)
    [line] = lines
    assert (line["user"], line["model"], line["status"]) == ("phx-a", model, "ok")
    assert line["conversation"] and line["dollars"] == pytest.approx(0.0045)


def test_the_hub_service_environment_describes_a_cloud_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m phoenix_nb.hub.gateway`'s set-up from the Hub's service environment."""

    class NoHub(TokenTable):  # the Hub's part: HubAuth would need a running Hub
        def browser_login(self) -> None:
            return None

    monkeypatch.setattr("phoenix_nb.hub.gateway.HubTokenAuth", lambda: NoHub({}))
    policy = tmp_path / "policy.toml"
    policy.write_text('[gateway]\nupstream = "bedrock"\n')
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AWS_KEYS[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_KEYS[1])
    env = {"PHOENIX_POLICY": str(policy), "AWS_REGION": "eu-west-3", "PHOENIX_AUDIT": "/dev/null"}
    gateway, _, _ = _from_environment(env)
    assert gateway.upstream == "https://bedrock-runtime.eu-west-3.amazonaws.com"
    assert isinstance(gateway._upstream_auth, SigV4Auth) and gateway.kind == "bedrock"
    with pytest.raises(Exception, match="needs AWS_REGION"):
        _from_environment({**env, "AWS_REGION": ""})
    with FakeVertex() as fake:
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(fake.credentials_file(tmp_path)))
        policy.write_text('[gateway]\nupstream = "vertex"\n')
        vertex = {"PHOENIX_POLICY": str(policy), "CLOUD_ML_REGION": "us-east5"}
        gateway, _, _ = _from_environment({**vertex, "PHOENIX_AUDIT": "/dev/null"})
    assert gateway.upstream == "https://us-east5-aiplatform.googleapis.com/v1"
    assert (gateway.wire.project, gateway.wire.region) == ("fake-project", "us-east5")
