"""What tokens cost: the price table as data, and the arithmetic on Usage.

Prices are US dollars per million tokens (MTok), Claude API list prices.
Source: Anthropic's pricing and model overview pages,
https://platform.claude.com/docs/en/about-claude/pricing and
https://platform.claude.com/docs/en/models/<model>/overview, read 2026-11-22.
Caveats found while reading: third-party trackers report a Sonnet 5.5 cache-read
cut from $0.20 to $0.10 on 2026-10-07 that the model page we could read does not
show yet; the table keeps the official $0.20 until the page says otherwise.
Haiku 5.5 and the 1M-context Sonnet 4.x ids bill a whole request at a higher
rate when its prompt (input + cache reads + cache writes) passes a threshold.

A model missing from the table has no price: callers show tokens only ("price
unknown"), never an invented price or $0.00. Prices the user gives for a model
(`c.Phoenix.models[name]["prices"]`, in a `ModelTables` value passed by each reader's
caller, as `core.models` explains) win over the table; a model on Bedrock or
Vertex is priced by its Anthropic id (`core.models.canonical`). Batch, fast mode,
data residency and server-tool fees (web search per call) are not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from phoenix_nb.core.models import ModelSpec, known_alias
from phoenix_nb.core.values import Usage

PER_MTOK = 1_000_000


@dataclass(frozen=True)
class Rates:
    """USD per million tokens of each kind."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float


@dataclass(frozen=True)
class ModelPrice:
    """A model's rates; `long` applies to a whole request whose prompt exceeds `long_above`."""

    base: Rates
    long: Rates | None = None
    long_above: int = 0

    def rates_for(self, usage: Usage) -> Rates:
        prompt = (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        )
        if self.long is not None and prompt > self.long_above:
            return self.long
        return self.base


def _r(i: float, o: float, w5: float, w1: float, r: float) -> Rates:
    return Rates(input=i, output=o, cache_write_5m=w5, cache_write_1h=w1, cache_read=r)


_OPUS_45 = ModelPrice(_r(5, 25, 6.25, 10, 0.50))
_OPUS_4 = ModelPrice(_r(15, 75, 18.75, 30, 1.50))
_SONNET_4 = ModelPrice(_r(3, 15, 3.75, 6, 0.30))
_SONNET_4_1M = ModelPrice(_r(3, 15, 3.75, 6, 0.30), _r(6, 22.50, 7.50, 12, 0.60), 200_000)
_SONNET_5 = ModelPrice(_r(2, 10, 2.50, 4, 0.20))

PRICES: Mapping[str, ModelPrice] = MappingProxyType(
    {
        "claude-fable-5-1": ModelPrice(_r(10, 50, 12.50, 20, 0.25)),
        "claude-fable-5": ModelPrice(_r(10, 50, 12.50, 20, 1.00)),
        "claude-opus-5-5": ModelPrice(_r(4, 20, 5, 8, 0.20)),
        "claude-opus-5": _OPUS_45,
        "claude-opus-4-8": _OPUS_45,
        "claude-opus-4-7": _OPUS_45,
        "claude-opus-4-6": _OPUS_45,
        "claude-opus-4-5": _OPUS_45,
        "claude-opus-4-1": _OPUS_4,
        "claude-opus-4-0": _OPUS_4,
        "claude-sonnet-5-5": _SONNET_5,
        "claude-sonnet-5": _SONNET_5,
        "claude-sonnet-4-6": _SONNET_4,
        "claude-sonnet-4-5": _SONNET_4,
        "claude-sonnet-4-5[1m]": _SONNET_4_1M,
        "claude-sonnet-4-0": _SONNET_4,
        "claude-sonnet-4-0[1m]": _SONNET_4_1M,
        "claude-3-7-sonnet-latest": _SONNET_4,
        "claude-haiku-5-5": ModelPrice(
            _r(0.10, 0.50, 0.125, 0.20, 0.01), _r(0.50, 2.50, 0.625, 1.00, 0.05), 100_000
        ),
        "claude-haiku-4-5": ModelPrice(_r(1, 5, 1.25, 2, 0.10)),
        "claude-3-5-haiku-latest": ModelPrice(_r(0.80, 4, 1, 1.6, 0.08)),
    }
)


# The user's prices per model name are a value (`Settings.model_tables()`), passed by
# each reader's caller: two Phoenix objects in one kernel keep their own.
NO_PRICES: Mapping[str, ModelPrice] = MappingProxyType({})


@dataclass(frozen=True)
class ModelTables:
    """The user's model descriptions and prices (`c.Phoenix.models`, checked once by
    `Settings.model_tables()`), handed with a conversation's services to the pure core
    (`ConvContext.tables`, `RecordHeader.prices`) and to the providers and limits: a
    value, never module state, so two Phoenix objects in one kernel keep their own.
    Plain dicts: a record header crosses to a child process."""

    specs: Mapping[str, ModelSpec] = field(default_factory=dict)
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)


def rates_from(raw: Mapping[str, float]) -> ModelPrice:
    """A user's price entry, USD per million tokens: `input` and `output` required;
    `cache_read`, `cache_write` (or `cache_write_5m` / `cache_write_1h`) default to
    the input rate, so a missing figure never makes a token look cheaper than input."""
    for key in ("input", "output"):
        if key not in raw:
            raise ValueError(f"a price needs '{key}' (USD per million tokens)")
    known = {"input", "output", "cache_read", "cache_write", "cache_write_5m", "cache_write_1h"}
    extra = set(raw) - known
    if extra:
        raise ValueError(f"unknown price field(s) {sorted(extra)}; known: {sorted(known)}")
    values = {k: float(v) for k, v in raw.items()}
    if any(v < 0 for v in values.values()):
        raise ValueError("prices cannot be negative")
    write = values.get("cache_write", values["input"])
    return ModelPrice(
        _r(
            values["input"],
            values["output"],
            values.get("cache_write_5m", write),
            values.get("cache_write_1h", write),
            values.get("cache_read", values["input"]),
        )
    )


def price_for(model: str, prices: Mapping[str, ModelPrice] = NO_PRICES) -> ModelPrice | None:
    """The model's prices: the user's (`prices`), else the table's (a dated id such as
    claude-haiku-4-5-20251001 matches its alias); None when nobody knows."""
    if model in prices:
        return prices[model]
    alias = known_alias(model, PRICES)
    return PRICES[alias] if alias else None


def cost(usage: Usage, model: str, prices: Mapping[str, ModelPrice] = NO_PRICES) -> float | None:
    """USD for one response's usage, or None when the model's price is unknown."""
    price = price_for(model, prices)
    if price is None:
        return None
    rates = price.rates_for(usage)
    one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
    five_min = usage.cache_creation_input_tokens - one_hour
    total = (
        usage.input_tokens * rates.input
        + usage.output_tokens * rates.output
        + five_min * rates.cache_write_5m
        + one_hour * rates.cache_write_1h
        + usage.cache_read_input_tokens * rates.cache_read
    )
    return total / PER_MTOK


@dataclass(frozen=True)
class Spend:
    """Tokens and money over several responses (a turn, a conversation)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    cost_usd: float | None = 0.0  # None: some response had no known price
    responses: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def cache_hit_share(self) -> float:
        """Share of prompt tokens read from the cache (0 when nothing was sent)."""
        prompt = self.prompt_tokens
        return self.cache_read_tokens / prompt if prompt else 0.0

    def add(self, usage: Usage, model: str, prices: Mapping[str, ModelPrice] = NO_PRICES) -> Spend:
        price = cost(usage, model, prices)
        return Spend(
            self.input_tokens + usage.input_tokens,
            self.output_tokens + usage.output_tokens,
            self.cache_write_tokens + usage.cache_creation_input_tokens,
            self.cache_read_tokens + usage.cache_read_input_tokens,
            None if price is None or self.cost_usd is None else self.cost_usd + price,
            self.responses + 1,
        )

    def as_json(self) -> dict[str, float | int | None]:
        """The record's form (docs/record-format.md)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_hit_share": round(self.cache_hit_share, 4),
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "responses": self.responses,
        }


def spend(
    usages: Iterable[Usage], model: str, prices: Mapping[str, ModelPrice] = NO_PRICES
) -> Spend:
    """The total of several responses of one model."""
    total = Spend()
    for usage in usages:
        total = total.add(usage, model, prices)
    return total


def format_usd(value: float | None) -> str:
    """Dollars for display ($0.0123 below a cent, $1.23 above); None gives "" (no price)."""
    if value is None:
        return ""
    if value == 0:
        return "$0.00"
    if value < 0.01:
        return f"${value:.4f}"
    return f"${value:.2f}"
