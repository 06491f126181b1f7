"""Bedrock and Vertex without credentials, through a real kernel: the first request
fails at once with an error naming what that cloud reads (never ANTHROPIC_API_KEY),
is not retried, and no request reaches the server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from phoenix_nb.testing.fake_bedrock import FakeBedrock
from phoenix_nb.testing.fake_vertex import FakeVertex
from tests.notebook.kernel_harness import MIME, Kernel, loaded_kernel, state_name

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[FakeBedrock, FakeVertex]]:
    with FakeBedrock() as bedrock, FakeVertex() as vertex:
        yield bedrock, vertex


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A kernel whose environment holds no AWS or Google credentials of any kind."""
    root = tmp_path_factory.mktemp("no-cloud-credentials")
    nowhere = str(root / "nowhere")
    env = {
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_SESSION_TOKEN": "",
        "AWS_BEARER_TOKEN_BEDROCK": "",
        "AWS_PROFILE": "",
        "AWS_CONFIG_FILE": nowhere,
        "AWS_SHARED_CREDENTIALS_FILE": nowhere,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_REGION": "us-west-2",
        "GOOGLE_APPLICATION_CREDENTIALS": "",
        "CLOUDSDK_CONFIG": nowhere,
        "NO_GCE_CHECK": "True",
        "CLOUD_ML_REGION": "us-east5",
        "ANTHROPIC_VERTEX_PROJECT_ID": "fake-project",
    }
    with loaded_kernel(root, "http://127.0.0.1:9", extra_env=env) as k:
        k.ok("%config Phoenix.retry_delay_scale = 0.001")
        yield k


@pytest.mark.parametrize(
    ("provider", "model", "names"),
    [
        ("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "AWS_ACCESS_KEY_ID"),
        ("vertex", "claude-sonnet-4-5@20250929", "GOOGLE_APPLICATION_CREDENTIALS"),
    ],
)
def test_missing_cloud_credentials_say_what_to_set(
    bare: Kernel, fakes: tuple[FakeBedrock, FakeVertex], provider: str, model: str, names: str
) -> None:
    bedrock, vertex = fakes
    url = bedrock.base_url if provider == "bedrock" else vertex.vertex_url
    bare.ok(f"%config Phoenix.provider = {provider!r}")
    bare.ok(f"%config Phoenix.base_url = {url!r}")
    bare.ok(f"%config Phoenix.model = {model!r}")
    cell = bare.run(f"%%phoenix --name creds-{provider}\nhello", allow_stdin=False, timeout=90)
    record = cell.last_bundle()[MIME]
    assert state_name(record) == "error"
    shown = json.dumps(record) + "".join(
        str(cell.last_bundle().get(k, "")) for k in ("text/plain", "text/markdown", "text/html")
    )
    assert names in shown, shown[:3000]
    assert "ANTHROPIC_API_KEY" not in shown and "API key" not in shown
    assert "attempts" not in shown and "will be retried" not in shown, "not retried"
    assert bedrock.wire == [] and vertex.wire == [], "nothing was sent"
