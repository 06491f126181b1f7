"""Commands get an allowlisted environment, seen from inside a real command.

Every secret-looking name and credential-bearing value below is put
in the kernel's environment; real `env` runs through BashTool (both modes) and
through a real kernel's `%%phoenix` turn, and nothing of them may show up.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from phoenix_nb.commands import CommandRunner
from phoenix_nb.commands.environment import (
    command_environment,
    value_embeds_credential,
    withheld_summary,
)
from phoenix_nb.core.values import Mode
from phoenix_nb.sandbox import detect_sandbox
from phoenix_nb.testing import FakeAnthropic, Turn, text, tool_use
from phoenix_nb.tools.base import ToolContext
from phoenix_nb.tools.bash import BashTool
from tests.notebook.kernel_harness import Kernel

SANDBOX = detect_sandbox()
MODES = [
    Mode.UNRESTRICTED,
    pytest.param(
        Mode.RESTRICTED,
        marks=pytest.mark.skipif(not SANDBOX.available, reason="needs Landlock"),
    ),
]

# Names a denylist would let through, each with a recognisable value.
SECRET_NAMES = [
    "OPENAI_KEY",
    "ENCRYPTION_KEY",
    "SIGNING_KEY",
    "SSH_KEY",
    "ACCESS_KEY",
    "CLIENT_KEY",
    "KEY",
    "AWS_ACCESS_KEY_ID",
    "DB_PASS",
    "GPG_PASSPHRASE",
    "GH_PAT",
    "JWT",
    "BEARER",
    "COOKIE",
    "STRIPE_SK",
    "ANTHROPIC_API_KEY",
    "CARGO_REGISTRY_TOKEN",
    "CONDA_CHANNEL_PASSWORD",
]
# Credentials inside values.
SECRET_VALUES = {
    "DATABASE_URL": "postgres://u:canary-pw-db@db.example:5432/app",
    "ANTHROPIC_BASE_URL": "https://user:canary-pw-proxy@proxy.example",
    "SENTRY_DSN": "https://canarysentrykey@o1.ingest.sentry.io/42",
}
# Allowed names whose values embed credentials: withheld all the same.
ALLOWED_NAMES_WITH_CREDENTIAL_VALUES = {
    "HTTPS_PROXY": "http://alice:canary-pw-https-proxy@proxy.example:3128",
    "http_proxy": "http://canary-proxy-token@proxy.example:3128",
    "PYTHONPATH": "https://x:canary-pw-pythonpath@h/",
    "SSL_CERT_DIR": "https://files.example/certs?token=canary-query-token",
}
ALLOWED = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "LC_TIME": "en_GB.UTF-8",
    "TERM": "xterm-256color",
    "USER": "alice",
    "SHELL": "/bin/bash",
    "VIRTUAL_ENV": "/opt/venvs/proj",
    "CONDA_PREFIX": "/opt/conda/envs/proj",
    "CONDA_PREFIX_1": "/opt/conda",
    "CONDA_PROMPT_MODIFIER": "(proj) ",
    "PYENV_VIRTUAL_ENV": "/opt/pyenv/versions/proj",
    "XDG_DATA_HOME": "/home/alice/.local/share",
    "PYENV_ROOT": "/opt/pyenv",
    "GOPATH": "/opt/go",
    "CARGO_HOME": "/opt/cargo",
    "JAVA_HOME": "/usr/lib/jvm/java-21",
    "HTTPS_PROXY": "http://proxy.example:3128",
    "GIT_AUTHOR_EMAIL": "alice@example.org",
}


def canary(name: str) -> str:
    return f"canary-{name.lower().replace('_', '-')}-0123456789"


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SECRET_NAMES:
        monkeypatch.setenv(name, canary(name))
    for name, value in SECRET_VALUES.items():
        monkeypatch.setenv(name, value)
    for name, value in ALLOWED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MYAPP_MODE", "fast")
    monkeypatch.setenv("MYAPP_TOKEN", canary("MYAPP_TOKEN"))
    monkeypatch.setenv("MY_EXACT_TOKEN", "exactly-allowed-value")


async def env_of(tmp_path: Path, mode: Mode, allow: tuple[str, ...] = ()) -> dict[str, str]:
    ctx = ToolContext(
        cwd=tmp_path, mode=mode, commands=CommandRunner(info=SANDBOX, env_allow=allow)
    )
    result = await BashTool().run({"command": "env -0"}, ctx, "t")
    assert not result.is_error, result.content
    pairs = [entry.split("=", 1) for entry in result.content.split("\0") if "=" in entry]
    return {name.strip(): value for name, value in pairs}


@pytest.mark.parametrize("mode", MODES)
async def test_secret_names_and_credential_values_never_reach_a_command(
    tmp_path: Path, mode: Mode, secret_env: None
) -> None:
    env = await env_of(tmp_path, mode, allow=("MYAPP_*", "MY_EXACT_TOKEN", "DATABASE_URL"))
    shown = "\n".join(f"{k}={v}" for k, v in env.items())
    for name in SECRET_NAMES:
        assert name not in env and canary(name) not in shown, name
    for name, value in SECRET_VALUES.items():
        # DATABASE_URL is allowed by name: its value still carries a password.
        assert name not in env and value not in shown, name
    assert "canary" not in shown
    for name, value in ALLOWED.items():
        assert env.get(name) == value, name
    assert env.get("MYAPP_MODE") == "fast"  # a user pattern admits ordinary names
    assert "MYAPP_TOKEN" not in env  # ... never secret-looking ones
    assert env.get("MY_EXACT_TOKEN") == "exactly-allowed-value"  # an exact name is the user's call
    assert env.get("PATH") and env.get("HOME")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "value"), sorted(ALLOWED_NAMES_WITH_CREDENTIAL_VALUES.items()))
async def test_allowed_names_are_withheld_when_the_value_embeds_a_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: Mode, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    env = await env_of(tmp_path, mode, allow=(name,))
    assert name not in env
    assert "canary" not in "".join(env.values())


@pytest.mark.parametrize(
    "value",
    [
        "postgres://u:pw@db/x",
        "mysql://root@localhost/db",
        "https://key@o1.ingest.sentry.io/1",
        "redis://:secretpw@cache:6379/0",
        "amqp://guest:guest@rabbit//",
        "root:hunter2@tcp(db:3306)/app",
        "https://storage.example/x?sig=abc&se=2026",
        "https://api.example/?access_token=abc",
        "git+https://oauth2:glpat-xyz@gitlab.example/g/r.git",
    ],
)
def test_credential_values_are_recognised(value: str) -> None:
    assert value_embeds_credential(value)


@pytest.mark.parametrize(
    "value",
    [
        "/usr/local/bin:/usr/bin:/bin:/opt/node@20/bin",
        "alice@example.org",
        "Alice Example <alice@example.org>",
        "https://proxy.example:3128",
        "git@github.com:org/repo.git",
        "https://example.org/path/@scope/pkg",
        "rs=0:di=01;34:ln=01;36",
    ],
)
def test_ordinary_values_are_not_mistaken_for_credentials(value: str) -> None:
    assert not value_embeds_credential(value)


def test_withheld_is_counted_by_name_and_the_api_key_is_never_allowed() -> None:
    source = {
        "PATH": "/bin",
        "ANTHROPIC_API_KEY": "sk-ant-api03-canary",
        "GH_PAT": "x",
        "OTHER": "y",
        "TERM": "sk-ant-api03-canary-looking",
    }
    result = command_environment(allow=("ANTHROPIC_API_KEY", "OTHER"), source=source)
    assert result.env == {"PATH": "/bin", "OTHER": "y"}
    assert result.withheld == ("ANTHROPIC_API_KEY", "GH_PAT", "TERM")


def test_status_summary_counts_without_values(secret_env: None) -> None:
    line = withheld_summary()
    count = len(command_environment().withheld)
    assert count >= len(SECRET_NAMES) + len(SECRET_VALUES)
    assert line.startswith(f"{count} environment variables withheld")
    assert "canary" not in line and "OPENAI_KEY" not in line
    fewer = withheld_summary(("MYAPP_*",))
    assert fewer.startswith(f"{count - 1} environment variables")


# ------------------------------------------------------------- through a real kernel


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[tuple[Kernel, FakeAnthropic]]:
    secrets = {name: canary(name) for name in SECRET_NAMES if name != "ANTHROPIC_API_KEY"}
    secrets |= {name: v for name, v in SECRET_VALUES.items() if name != "ANTHROPIC_BASE_URL"}
    secrets["MYAPP_MODE"] = "visible-through-env-allow"
    # c.Phoenix.env_allow as a user sets it: in the IPython profile's config.
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text("c.Phoenix.env_allow = ['MYAPP_*']\n")
    secrets["IPYTHONDIR"] = str(tmp_path / "ipython")
    with FakeAnthropic() as fake:
        k = Kernel(tmp_path, fake.base_url, extra_env=secrets)
        try:
            k.ok("%load_ext phoenix_nb")
            yield k, fake
        finally:
            k.shutdown()


@pytest.mark.timeout(120)
def test_kernel_turn_and_status_keep_secrets_home(
    kernel: tuple[Kernel, FakeAnthropic],
) -> None:
    """c.Phoenix.env_allow (profile config) reaches the command; status counts, never shows."""
    kern, fake = kernel
    fake.script(
        Turn([tool_use("bash", {"command": "env"})]),
        Turn([text("done")]),
    )
    cell = kern.run("%%phoenix --name env-allow --mode unrestricted\nshow env")
    assert cell.status == "ok", cell.error()
    sent = str(fake.requests[-1].body["messages"])
    assert "MYAPP_MODE=visible-through-env-allow" in sent
    assert "PATH=" in sent
    assert "canary" not in sent and "test-key" not in sent
    status = kern.ok("%phoenix status env-allow").text()
    line = next(x for x in status.splitlines() if x.startswith("environment"))
    count = int(line.split()[1])
    assert count >= len(SECRET_NAMES) + len(SECRET_VALUES) - 1
    assert "canary" not in status and "OPENAI_KEY" not in status


PROVIDER_KEYS = {
    "ANTHROPIC_AUTH_TOKEN": "tok-anthropic-0123456789",
    "OPENAI_API_KEY": "sk-proj-0123456789abcdef",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEJr//////////wEaDHEXAMPLE",
    "AWS_BEARER_TOKEN_BEDROCK": "bedrock-api-key-0123456789",
}


def test_provider_credentials_never_reach_a_command_even_when_allowed() -> None:
    source = {
        **PROVIDER_KEYS,
        "PATH": "/usr/bin",
        "MY_URL": "https://x/?v=sk-proj-0123456789abcdef",
    }
    result = command_environment(allow=[*PROVIDER_KEYS, "MY_URL", "AWS_*"], source=source)
    assert set(result.env) == {"PATH"}
    assert set(PROVIDER_KEYS) | {"MY_URL"} <= set(result.withheld)


def test_credential_files_named_by_variables_are_hidden(tmp_path: Path) -> None:
    from phoenix_nb import sandbox
    from phoenix_nb.commands.environment import credential_files

    key_file = tmp_path / "service-account.json"
    key_file.write_text("{}")
    source = {
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "missing"),
    }
    assert credential_files(source) == [str(key_file)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
        assert str(key_file) in sandbox.hidden_paths(tmp_path, sandbox.SandboxPolicy())


def test_fork_secrets_are_the_withheld_values_that_may_be_credentials() -> None:
    from phoenix_nb.commands.environment import fork_secrets

    source = {
        **PROVIDER_KEYS,
        "SERVICE_URL": "postgres://app:pw-123456@db/app",
        "OPAQUE_SETTING": "opaque-0123456789",
        "JUPYTER_PATH": "/usr/share/jupyter:/opt/jupyter",
        "JPY_PARENT_PID": "12345",
        "FEATURE_ON": "true",
        "SHORT": "abc",
    }
    withheld = command_environment(source=source).withheld
    assert set(fork_secrets(withheld, source)) == {
        *PROVIDER_KEYS.values(),
        "postgres://app:pw-123456@db/app",
        "opaque-0123456789",
    }
