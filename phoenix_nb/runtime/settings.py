"""Settings of a phoenix_nb session, from explicit values, traitlets or the environment.

Power users build `Settings` directly; the notebook builds them with
`Settings.from_config` from its traitlets (`c.Phoenix.…`), the one place where
config values become settings, so none is dropped on the way (a test holds
every field to a trait). A `%config Phoenix.X` in a running notebook comes back
through here too: the session rebuilds the settings and `Phoenix.reconfigure`
hands them to what the next turn reads. Environment variables are read here and
nowhere else in the runtime.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from phoenix_nb.checkpoints.config import CheckpointConfig
from phoenix_nb.core.models import ModelSpec, Supports
from phoenix_nb.core.prices import ModelPrice, ModelTables, rates_from
from phoenix_nb.core.states import DEFAULT_MAX_TURN_ROUNDS
from phoenix_nb.errors import PhoenixError
from phoenix_nb.policy import HUB_TOKEN_VARIABLES, Policy
from phoenix_nb.sandbox import DEFAULT_DENY_READ, SandboxLimits

DEMO_MODEL = "demo"
# Wire formats phoenix speaks (llm.providers.make_provider builds each).
PROVIDERS = ("anthropic", "bedrock", "vertex", "openai")


class SettingsError(PhoenixError, ValueError):
    """A setting that cannot be used; the message names it and says what is allowed."""


def _model_entry(raw: Any) -> tuple[ModelSpec, ModelPrice | None]:
    """One `c.Phoenix.models` entry as typed values (checked here, once)."""
    if not isinstance(raw, Mapping):
        raise TypeError("each model is a dict of context_window, max_output, prices, supports")
    known = {"context_window", "max_output", "prices", "supports"}
    extra = set(raw) - known
    if extra:
        raise ValueError(f"unknown field(s) {sorted(extra)}; known: {sorted(known)}")
    limits: dict[str, int | None] = {}
    for key in ("context_window", "max_output"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{key} must be a whole number of tokens (got {value!r})")
        if value is not None and value <= 0:
            raise ValueError(f"{key} must be positive (got {value})")
        limits[key] = value
    said = raw.get("supports") or {}
    if not isinstance(said, Mapping) or set(said) - {"thinking", "caching", "images"}:
        raise ValueError("supports takes thinking, caching and images, each true or false")
    supports = Supports(**{k: bool(v) for k, v in said.items()})
    prices = raw.get("prices")
    if prices is not None and not isinstance(prices, Mapping):
        raise TypeError("prices is a dict of USD per million tokens (input, output, …)")
    price = rates_from(prices) if prices else None
    return ModelSpec(limits["context_window"], limits["max_output"], supports), price


@dataclass(frozen=True)
class Server:
    """Who serves a conversation's model: the wire format (one of PROVIDERS) and the
    base URL (None: the provider's own default). Stored with a conversation when it
    starts and used for its whole life (a history belongs with the server that has
    seen it; the seeds fix the model for life, REQ-BED-022, and the server goes with
    it): `c.Phoenix.provider` and `base_url` choose for new conversations. Never holds
    a key: the base URL is the server's identity."""

    provider: str = "anthropic"
    base_url: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"provider": self.provider, "base_url": self.base_url}

    @classmethod
    def of_record(cls, record: Mapping[str, Any], default: Server) -> Server:
        """A stored conversation's server; `default` for one stored before servers were.
        A provider this version does not speak (a later version's) is kept as stored:
        such a conversation cannot go on here and says so, it never moves silently."""
        raw = record.get("server")
        if not isinstance(raw, Mapping) or not isinstance(raw.get("provider"), str):
            return default
        url = raw.get("base_url")
        return cls(str(raw["provider"]), str(url) if url else None)

    def describe(self) -> str:
        return self.provider + (f" at {self.base_url}" if self.base_url else "")

    @property
    def key(self) -> str:
        """The providers' cache key: one provider object per server."""
        return f"{self.provider} {self.base_url or ''}"

    @property
    def off_anthropic(self) -> bool:
        """True when this is anything but Anthropic's own API (a base URL, Bedrock,
        Vertex, OpenAI-compatible): a model nobody describes then gets the conservative
        window (core.models.CONSERVATIVE), not the smallest Claude one."""
        return self.provider != "anthropic" or bool(self.base_url)

    @property
    def limits_scope(self) -> str:
        """Which server cached model limits belong to ("" for Anthropic's own API: the
        same name elsewhere, a local "llama3", is another model)."""
        return self.key.strip() if self.off_anthropic else ""


DEFAULT_MODEL = "claude-sonnet-5-5"


def default_model() -> str:
    """The real model when a key is set, else the offline scripted demo."""
    if os.environ.get("PHOENIX_MODEL"):
        return os.environ["PHOENIX_MODEL"]
    return DEFAULT_MODEL if os.environ.get("ANTHROPIC_API_KEY") else DEMO_MODEL


@dataclass(frozen=True)
class SubAgentLimits:
    """How many sub-agents run at once and for how long (seconds)."""

    max_parallel: int = 4
    timeout: float = 600.0  # a child's default
    timeout_max: float = 3600.0  # the most a spawn_agents call may ask for


# Config names (`c.Phoenix.<name>`, flat as traitlets need them) of the nested values.
NESTED_CONFIG: dict[str, tuple[str, str]] = {
    "sub_agent_timeout": ("sub_agents", "timeout"),
    "sub_agent_timeout_max": ("sub_agents", "timeout_max"),
    "max_parallel_sub_agents": ("sub_agents", "max_parallel"),
    # Restricted-mode budgets (README "Security model"): memory and processes are
    # shared by one conversation's commands and background jobs.
    "sandbox_memory": ("sandbox", "memory"),
    "sandbox_max_procs": ("sandbox", "max_procs"),
    "sandbox_tmp_bytes": ("sandbox", "tmp_bytes"),
    "sandbox_tmp_inodes": ("sandbox", "tmp_inodes"),
    # Checkpoints of the working tree while the agent can write (phoenix_nb.checkpoints).
    "checkpoints": ("checkpoints", "enabled"),
    "checkpoint_max_file_size": ("checkpoints", "max_file_size"),
    "checkpoint_keep_days": ("checkpoints", "keep_days"),
    "checkpoint_max_bytes": ("checkpoints", "max_bytes"),
}
_GROUPS = frozenset(group for group, _ in NESTED_CONFIG.values())


@dataclass
class Settings:
    home: Path | None = None  # store root; None: $PHOENIX_HOME or <jupyter data dir>/phoenix
    model: str = field(default_factory=default_model)
    api_key: str | None = None  # None: ANTHROPIC_API_KEY
    # Who serves the model, and what phoenix knows of models (README "Models"):
    provider: str = "anthropic"  # one of PROVIDERS
    base_url: str | None = None  # None: ANTHROPIC_BASE_URL (anthropic), the SDK's own otherwise
    # {name: {context_window, max_output, prices: {input, output, …}, supports:
    # {thinking, caching, images}}} for models the registry and the server do not describe.
    models: Mapping[str, Any] | None = None
    helper_model: str | None = None  # keyword_search ranking; None: no ranking call
    thinking: Mapping[str, Any] | None = None
    retry_delay_scale: float = 1.0  # tests shrink real backoff delays
    stall_timeout: float = 60.0
    # Prompt-cache lifetime: "1h" (default: people read and think between cells for
    # longer than 5 minutes), "5m", or None for no caching (README "Cost and caching").
    cache_ttl: str | None = "1h"
    sub_agents: SubAgentLimits = field(default_factory=SubAgentLimits)
    secret_patterns: tuple[str, ...] | None = None  # None: tools' defaults
    sandbox: SandboxLimits = field(default_factory=SandboxLimits)  # Restricted-mode budgets
    deny_read: tuple[str, ...] | None = None  # None: sandbox.DEFAULT_DENY_READ
    env_allow: tuple[str, ...] = ()  # variables (names or patterns) commands may see
    kernel_access: str = "on"  # "off": the kernel tools stay declared and answer with an error
    # Checkpoints of the working tree while the agent can write (phoenix_nb.checkpoints):
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    # The turn budget (core/states.py TurnBudget): model responses for one user message
    # (None or 0: no limit), and dollars one turn / the whole conversation may spend
    # (None: no limit; they apply to models with a known price only).
    max_turn_rounds: int | None = DEFAULT_MAX_TURN_ROUNDS
    max_turn_cost: float | None = None
    max_conversation_cost: float | None = None
    # The admin's policy (phoenix_nb.policy), set by `with_policy` only: what the
    # runtime checks when a conversation is created, given a model or approved.
    policy: Policy | None = None
    # MCP servers (README "Tools from MCP servers"): {name: {command, args, env, cwd,
    # network, write, timeout, memory} | {url, headers}}; checked by phoenix_nb.mcp.
    mcp_servers: Mapping[str, Any] | None = None
    # More MCP tools than this: their names up front, their schemas on demand.
    mcp_defer_above: int = 30

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise SettingsError(
                f"provider must be one of {', '.join(PROVIDERS)} (got {self.provider!r})"
            )

    def model_tables(self) -> ModelTables:
        """`models` as the value every reader is given: limits and supports
        (core.models), prices (core.prices). A bad entry raises SettingsError naming it."""
        specs: dict[str, ModelSpec] = {}
        prices: dict[str, ModelPrice] = {}
        for name, raw in (self.models or {}).items():
            try:
                spec, price = _model_entry(raw)
            except (TypeError, ValueError) as exc:
                raise SettingsError(f"c.Phoenix.models[{name!r}]: {exc}") from None
            specs[str(name)] = spec
            if price is not None:
                prices[str(name)] = price
        return ModelTables(specs, prices)

    @property
    def server(self) -> Server:
        """The server new conversations start on."""
        return Server(self.provider, self.base_url)

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> Settings:
        """Settings from config values (`c.Phoenix.<field>`); absent names keep defaults.

        Config speaks in traitlets' types, so: an empty string means "not set"
        (the environment or the default decides), lists become tuples, an empty
        list or mapping means the default, and `cache_ttl = "off"` turns caching
        off. The flat names of nested values (`sandbox_memory`) go through
        NESTED_CONFIG. Names that are not settings are the caller's own (display options)
        and are ignored here; `api_key` is never read from config (see
        NOT_FROM_CONFIG).
        """
        kwargs: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for name, (group, key) in NESTED_CONFIG.items():
            if name in values and values[name] != "":
                nested.setdefault(group, {})[key] = values[name]
        for f in fields(cls):
            if f.name not in values or f.name in NOT_FROM_CONFIG or f.name in _GROUPS:
                continue
            value = values[f.name]
            if isinstance(value, str) and value == "" and f.name != "cache_ttl":
                continue  # unset: the environment or the default decides
            if isinstance(value, list | tuple):
                if not value and f.name in _EMPTY_IS_DEFAULT:
                    continue
                value = tuple(str(v) for v in value)
            elif isinstance(value, Mapping):
                value = dict(value) or None
            if f.name == "home":
                value = Path(str(value)).expanduser()
            elif f.name == "cache_ttl" and value in ("off", ""):
                value = None
            kwargs[f.name] = value
        anthropic = kwargs.get("provider", "anthropic") == "anthropic"
        if anthropic and "base_url" not in kwargs and os.environ.get("ANTHROPIC_BASE_URL"):
            # read here, not left to the SDK: it also decides whether "demo" is served locally
            kwargs["base_url"] = os.environ["ANTHROPIC_BASE_URL"]
        base = cls(**kwargs)
        return replace(
            base,
            **{group: replace(getattr(base, group), **kw) for group, kw in nested.items()},
        )

    @classmethod
    def config_names(cls) -> set[str]:
        """Every name a notebook may set (`c.Phoenix.<name>`): the flat fields and the
        flat names of the nested values' fields."""
        flat = {f.name for f in fields(cls)} - _GROUPS
        return (flat | set(NESTED_CONFIG)) - set(NOT_FROM_CONFIG)

    def with_policy(
        self, policy: Policy | None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """These settings inside the policy's bounds, or PolicyRefusal naming the bound.

        With a gateway, every request goes to it with the user's Hub token as the
        credential (the token is a secret like a provider key: core.secrets lists
        it). A model the policy does not allow is refused, unless it is only the
        default (`default_model()`: the demo where no key is set), which becomes the
        policy's `[models] default`. Budgets become the tighter of the user's and the
        policy's; the policy's `deny_read` paths are hidden besides the user's."""
        if policy is None:
            return self
        environ = os.environ if environ is None else environ
        changes: dict[str, Any] = {"policy": policy}
        provider = self.provider
        if policy.gateway_url is not None and provider == "anthropic":
            provider = policy.gateway_provider  # the default follows the gateway's wire format
        policy.check_provider(provider, self.base_url)
        if policy.gateway_url is not None:
            changes["provider"] = provider
            changes["base_url"] = policy.gateway_url
            token = next((environ[n] for n in HUB_TOKEN_VARIABLES if environ.get(n)), None)
            changes["api_key"] = token
        model = self.model
        if not policy.model_allowed(model) and model == default_model():
            if policy.default_model is None:
                raise policy.refuse(
                    "models.allowed",
                    f"the default model {model!r} is not allowed and the policy names no "
                    "[models] default: choose one with `%config Phoenix.model = '…'`.",
                )
            model = policy.default_model
        policy.check_model(model)
        changes["model"] = model
        b = policy.budgets
        changes["max_turn_cost"] = _tighter(self.max_turn_cost, b.turn)
        changes["max_conversation_cost"] = _tighter(self.max_conversation_cost, b.conversation)
        if policy.deny_read:
            changes["deny_read"] = (
                *(DEFAULT_DENY_READ if self.deny_read is None else self.deny_read),
                *policy.deny_read,
            )
        return replace(self, **changes)

    def request_headers(self, slug: str) -> Mapping[str, str]:
        """Headers each model request of conversation `slug` carries: the gateway's
        conversation tag (and the user's named server, if any) where a policy names a
        gateway, none otherwise."""
        if self.policy is None or self.policy.gateway_url is None:
            return {}
        headers = {"x-phoenix-conversation": slug}
        server = os.environ.get("JUPYTERHUB_SERVER_NAME")  # a named server's; "" the default
        if server:
            headers["x-phoenix-server"] = server
        return headers

    def store_root(self) -> Path:
        """The store's folder: `home`, else $PHOENIX_HOME, else Jupyter's data dir."""
        if self.home is not None:
            return Path(self.home).expanduser()
        from phoenix_nb.store import default_root  # the store loads on first use

        return default_root()


# Settings a notebook cannot set, and why (a test holds every other field to a trait).
NOT_FROM_CONFIG = {
    "api_key": "read from ANTHROPIC_API_KEY only: a key in a config file or a notebook "
    "would travel with it",
    "policy": "the admin's policy file ($PHOENIX_POLICY), read once at load: a notebook "
    "cannot set it",
}


def _tighter(mine: float | None, bound: float | None) -> float | None:
    """The smaller of two dollar bounds, None being no bound."""
    if bound is None:
        return mine
    return bound if mine is None else min(mine, bound)


# Tuple settings whose empty value in config means "the default", not "nothing".
_EMPTY_IS_DEFAULT = frozenset({"secret_patterns"})
