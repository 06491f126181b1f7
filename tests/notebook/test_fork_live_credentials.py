"""A fork of the kernel holds no credential the kernel made or resolved at run time.

The environment names only what the kernel was given; these credentials come
later, through the SDKs, in a real kernel talking to each fake server:

* Vertex: google-auth mints an access token (``ya29.…``) from a service-account
  key file at the first request (the fake's token endpoint);
* Bedrock, with no ``AWS_*`` variable: botocore resolves the default profile
  through ``credential_process`` (a command printing the credentials, read from
  a file no list names) and parses ``~/.aws/credentials`` (INI, another profile's
  secret); a cell loads an AWS SSO cache file (JSON) as a user's code would;
* a gateway token sent as a header (``ANTHROPIC_CUSTOM_HEADERS``): the SDK keeps
  the header's value apart from the variable's text.

The scripted model then sends `test_fork_secrets.HUNT` (every readable mapping
of the fork, gc, history, environment), carrying only a prefix and a SHA-256 of
each secret in UTF-8, UTF-16 and UTF-32; it prints what it finds reversed,
base64, hex and percent-encoded. Checked from outside: the job's count, and
every spelling of every secret in the tool result the fake server received and
in the store's files. The fakes answer only requests carrying the credential
(Vertex: the token its endpoint minted; Bedrock: a SigV4 signature, and the
kernel has no other AWS credentials), so it was in the kernel's memory.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from phoenix_nb.demo.server import FakeAnthropic
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import Turn, text, tool_use
from phoenix_nb.testing.fake_bedrock import FakeBedrock
from phoenix_nb.testing.fake_vertex import ACCESS_TOKEN, FakeVertex
from tests.notebook.kernel_harness import Kernel, loaded_kernel
from tests.notebook.test_fork_secrets import HUNT, _probes, _store_text, spellings_found
from tests.notebook.test_kernel_tools import result_of, text_of

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not detect_sandbox().available, reason="run_python needs the sandbox"),
]

PROCESS_KEY_ID = "AKIAPROCESSEXAMPLE77"
PROCESS_SECRET = "pRoCeSs/SeCrEt+Kq2Wm8Zt5Xv1Yb4Nc7Hd0Lf3Jg6"
PROCESS_SESSION = "IQoJb3JpZ2luX2VjEProcessSessionTokenZq8Wm2Lt5Xv"
PROFILE_SECRET = "oThErPrOfIlE/Secret+Hx3Kd9Mw2Nb6Vc1Zq7Rt4"
SSO_ACCESS_TOKEN = "aoaAAAAAGSsoCacheAccessToken-Rw8Tq3Zm6Xn1Yb"
SSO_CLIENT_SECRET = "eyJraWQiOiJzc29DbGllbnRTZWNyZXQtVm44UXcyIn0"
GATEWAY_TOKEN = "gw-Lq4Zt8Wx2Mv6Nb1Kc5Hd9Rj3"


@dataclass
class Wire:
    name: str
    fake: FakeAnthropic
    model: str
    env: dict[str, str] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    setup: tuple[str, ...] = ()


def _aws_home(home: Path) -> None:
    aws = home / ".aws"
    (aws / "sso" / "cache").mkdir(parents=True)
    process = home / "vault" / "process.json"
    process.parent.mkdir()
    process.write_text(
        json.dumps(
            {
                "Version": 1,
                "AccessKeyId": PROCESS_KEY_ID,
                "SecretAccessKey": PROCESS_SECRET,
                "SessionToken": PROCESS_SESSION,
            }
        )
    )
    (aws / "config").write_text(
        "[default]\nregion = us-west-2\n"
        f"credential_process = {sys.executable} -c "
        f"\"import sys; sys.stdout.write(open('{process}').read())\"\n"
    )
    (aws / "credentials").write_text(
        "[work]\naws_access_key_id = AKIAWORKPROFILE00042\n"
        f"aws_secret_access_key = {PROFILE_SECRET}\n"
    )
    (aws / "sso" / "cache" / "5e1c0ffee.json").write_text(
        json.dumps(
            {
                "startUrl": "https://example.awsapps.com/start",
                "region": "us-west-2",
                "accessToken": SSO_ACCESS_TOKEN,
                "clientSecret": SSO_CLIENT_SECRET,
                "expiresAt": "2099-01-01T00:00:00Z",
            }
        )
    )


def _wire(name: str, folder: Path) -> Wire:
    if name == "vertex":
        vertex = FakeVertex().start()
        return Wire(
            "vertex",
            vertex,
            "claude-sonnet-4-5@20250929",
            env={
                "GOOGLE_APPLICATION_CREDENTIALS": str(vertex.credentials_file(folder)),
                "CLOUD_ML_REGION": "us-east5",
                "ANTHROPIC_VERTEX_PROJECT_ID": "fake-project",
                "CLOUDSDK_CONFIG": str(folder / "gcloud"),
                "NO_GCE_CHECK": "True",
            },
            config={"provider": "vertex", "base_url": vertex.vertex_url},
            secrets={"Vertex access token": ACCESS_TOKEN},
        )
    if name == "bedrock":
        home = folder / "home"
        _aws_home(home)
        bedrock = FakeBedrock().start()
        return Wire(
            "bedrock",
            bedrock,
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            env={"HOME": str(home), "AWS_REGION": "us-west-2"},
            config={"provider": "bedrock", "base_url": bedrock.base_url},
            secrets={
                "credential_process secret": PROCESS_SECRET,
                "credential_process session token": PROCESS_SESSION,
                "credentials-file profile secret": PROFILE_SECRET,
                "SSO cache access token": SSO_ACCESS_TOKEN,
                "SSO cache client secret": SSO_CLIENT_SECRET,
            },
            setup=(
                "import json, pathlib\n"
                "cache = json.loads(next(pathlib.Path('~/.aws/sso/cache').expanduser()"
                ".glob('*.json')).read_text())",
            ),
        )
    gateway = FakeAnthropic().start()
    return Wire(
        "gateway",
        gateway,
        "claude-sonnet-4-5",
        env={"ANTHROPIC_CUSTOM_HEADERS": f"X-Gateway-Token: {GATEWAY_TOKEN}"},
        secrets={"gateway token": GATEWAY_TOKEN},
    )


@pytest.fixture(scope="module", params=["vertex", "bedrock", "gateway"])
def wire(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Wire]:
    w = _wire(request.param, tmp_path_factory.mktemp(f"live-{request.param}"))
    try:
        yield w
    finally:
        w.fake.stop()


@pytest.fixture(scope="module")
def kernel(wire: Wire, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = {"PHOENIX_MODEL": wire.model, **wire.env}
    root = tmp_path_factory.mktemp(f"kernel-{wire.name}")
    with loaded_kernel(root, wire.fake.base_url, extra_env=env) as k:
        for key, value in wire.config.items():
            k.ok(f"%config Phoenix.{key} = {value!r}")
        for cell in wire.setup:
            k.ok(cell)
        yield k


def test_a_fork_holds_no_credential_made_at_run_time(kernel: Kernel, wire: Wire) -> None:
    code = HUNT.replace("PROBES_JSON", repr(json.dumps(_probes(wire.secrets))))
    hunt = tool_use("run_python", {"code": code, "timeout": 150})
    wire.fake.script(Turn([hunt]), Turn([text("Finished looking.")]))
    cell = kernel.run("%%phoenix --name hunt\nLook around.", timeout=280)
    assert cell.status == "ok", cell.error()
    assert len(wire.fake.requests) == 2, (cell.text(), cell.final_outputs())
    if isinstance(wire.fake, FakeVertex):  # it answers only the token its endpoint minted
        assert wire.fake.token_requests >= 1
    result = text_of(result_of(wire.fake, hunt.id))
    print(result[:3000])
    assert "FOUND 0" in result, result[:3000]
    places = {"tool result": result, "store": _store_text(kernel.home)}
    leaks = {
        (name, place): how
        for name, secret in wire.secrets.items()
        for place, blob in places.items()
        if (how := spellings_found(secret, blob))
    }
    assert not leaks, leaks
