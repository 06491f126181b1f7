"""The wire formats phoenix speaks, each a fake server and what a kernel needs to reach
it through its real SDK: shared by the kernel tests that run every provider
(test_kernel_providers.py, test_kernel_conformance.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from phoenix_nb.demo.server import FakeAnthropic
from phoenix_nb.testing.compat_server import CompatServer
from phoenix_nb.testing.fake_bedrock import FakeBedrock
from phoenix_nb.testing.fake_openai import FakeOpenAI
from phoenix_nb.testing.fake_vertex import FakeVertex

__all__ = ["SDK_MODULES", "Wire", "make_wire", "models_asked", "received_bodies"]

SDK_MODULES = ("openai", "boto3", "botocore", "google")


@dataclass
class Wire:
    name: str
    fake: FakeAnthropic
    model: str
    env: dict[str, str] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    priced: bool = False
    image_word: str = '"type": "image"'
    # SDK packages this format loads in the kernel (none but its own may appear).
    loads: tuple[str, ...] = ()


def make_wire(name: str, folder: Path) -> Wire:
    if name == "anthropic":  # the Messages API with every feature, a key checked
        fake = FakeAnthropic(api_key="sk-ant-kernel-test").start()
        return Wire(
            "anthropic",
            fake,
            "claude-sonnet-4-5",
            env={"ANTHROPIC_API_KEY": "sk-ant-kernel-test"},
            priced=True,
        )
    if name == "compat":
        return Wire("compat", CompatServer().start(), "qwen3-coder:30b")
    if name == "bedrock":
        fake = FakeBedrock().start()
        return Wire(
            "bedrock",
            fake,
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            env={
                "AWS_ACCESS_KEY_ID": "AKIDFAKEFAKEFAKE",
                "AWS_SECRET_ACCESS_KEY": "fake-secret-access-key",
                "AWS_REGION": "us-west-2",
                "AWS_CONFIG_FILE": str(folder / "none"),
                "AWS_SHARED_CREDENTIALS_FILE": str(folder / "none"),
            },
            config={"provider": "bedrock", "base_url": fake.base_url},
            priced=True,
            loads=("boto3", "botocore"),
        )
    if name == "vertex":
        fake = FakeVertex().start()
        return Wire(
            "vertex",
            fake,
            "claude-sonnet-4-5@20250929",
            env={
                "GOOGLE_APPLICATION_CREDENTIALS": str(fake.credentials_file(folder)),
                "CLOUD_ML_REGION": "us-east5",
                "ANTHROPIC_VERTEX_PROJECT_ID": "fake-project",
                "CLOUDSDK_CONFIG": str(folder / "gcloud"),
                "NO_GCE_CHECK": "True",
            },
            config={"provider": "vertex", "base_url": fake.vertex_url},
            priced=True,
            loads=("google",),
        )
    fake = FakeOpenAI(api_key="sk-kernel-test").start()
    return Wire(
        "openai",
        fake,
        "gpt-test-unknown",
        env={"OPENAI_API_KEY": "sk-kernel-test"},
        config={"provider": "openai", "base_url": fake.base_url},
        image_word='"type": "image_url"',
        loads=("openai",),
    )


def received_bodies(wire: Wire) -> list[Mapping[str, Any]]:
    """Every request body the server received, in order: for Bedrock and Vertex the one
    their cloud route received (refused ones included), as the SDK sent it."""
    if isinstance(wire.fake, FakeBedrock | FakeVertex):
        return [r.body for r in wire.fake.wire]
    return [r.body for r in wire.fake.requests]


def models_asked(wire: Wire) -> list[str]:
    """The model each request named, in order: in the body, or for Bedrock and Vertex in
    the path their cloud route received (`/model/{id}/invoke…`, `…/models/{id}:…`)."""
    if isinstance(wire.fake, FakeBedrock):
        return [r.path.split("/model/", 1)[1].split("/", 1)[0] for r in wire.fake.wire]
    if isinstance(wire.fake, FakeVertex):
        return [r.path.split("/models/", 1)[1].split(":", 1)[0] for r in wire.fake.wire]
    return [str(r.body["model"]) for r in wire.fake.requests]
