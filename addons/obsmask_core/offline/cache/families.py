"""The model families the cache benchmark replays each session under: the model id
a request carries (so that ``price_model = "auto"`` prices it by that
model's row of the shipped table), and the provider's prices and cache rule
the forwarded requests are billed under, by the replay's own caches
(``obsmask_core.offline.cache.model``).

The prices and cache rules here are the replay's, written from the
providers' pages, not read from the proxy's table
(``conversation/billing/model_prices.toml``): the benchmark checks the
proxy, it does not borrow its figures. ``table_agreement`` says whether
the table's row for each family's model has the same terms.

Anthropic families are billed under both readings of the documented
lookback ("up to approximately 20 blocks"): "strict", the boundaries
after blocks b..b-19 of a breakpoint on block b, and "lenient", also the
one after block b-20. Each (family, reading) is a ``Line`` of the output,
named ``family/reading`` (``sonnet/strict``) or, with one reading, the
family's name (``gpt_5``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from obsmask_core.conversation.billing.model_table import ModelTable
from obsmask_core.conversation.billing.price_models import PRICE_UNIT
from obsmask_core.offline.cache.model import (
    LENIENT_LOOKBACK_BLOCKS,
    LOOKBACK_BLOCKS,
    AnthropicCache,
    AnthropicRequest,
    OpenAICache,
)
from obsmask_core.offline.cache.prompt_blocks import Prompt

# Cache rules of a family.
ANTHROPIC_BREAKPOINTS = "anthropic_breakpoints"
OPENAI_PREFIX_STEPS = "openai_prefix_steps"  # free writes, 1,024 + 128k
OPENAI_PREFIX = "openai_prefix"  # GPT-5.6 and later: writes billed, no steps
NO_CACHE = "none"
# The readings of Anthropic's lookback: name -> boundaries looked back.
LOOKBACKS: Mapping[str, int] = MappingProxyType(
    {"strict": LOOKBACK_BLOCKS, "lenient": LENIENT_LOOKBACK_BLOCKS})
PLAIN_INPUT = 1.0  # a token neither read nor written


@dataclass(frozen=True)
class Family:
    """A family of models as the replay bills it. ``model``: the id set on
    every request (None: the session's own); ``formats``: the wire formats
    whose sessions it bills; prices in multiples of the base input price."""

    name: str
    label: str
    model: str | None
    formats: tuple[str, ...]
    cache: str
    read: float = 1.0
    write: float = 1.0  # every token not read, up to the last breakpoint for Anthropic
    write_1h: float = 1.0
    minimum: int = 0
    step: int = 1  # OpenAI's steps from the minimum

    @property
    def provider(self) -> Literal["anthropic", "openai"]:
        """Whose rows of obsmask's table the family's model is looked up in."""
        return "anthropic" if self.cache == ANTHROPIC_BREAKPOINTS else "openai"

    @property
    def readings(self) -> tuple[str, ...]:
        return tuple(LOOKBACKS) if self.cache == ANTHROPIC_BREAKPOINTS else ("",)

    def lines(self) -> tuple[Line, ...]:
        return tuple(Line(self, reading) for reading in self.readings)

    def describe(self) -> str:
        if self.cache == NO_CACHE:
            return "no prompt cache: every input token at 1.0"
        if self.cache == ANTHROPIC_BREAKPOINTS:
            return (f"Anthropic's breakpoints: reads {self.read:g}x, writes {self.write:g}x "
                    f"({self.write_1h:g}x for a 1-hour ttl) up to the last breakpoint, after "
                    f"it 1.0x; nothing under {self.minimum:,} tokens")
        steps = (f"in steps of {self.step}" if self.step > 1 else "no steps")
        writes = ("writes free (1.0x)" if self.write == PLAIN_INPUT
                  else f"every token not read written at {self.write:g}x")
        return (f"OpenAI's prefix cache: reads {self.read:g}x from {self.minimum:,} tokens, "
                f"{steps}; {writes}")


@dataclass(frozen=True)
class Line:
    """A family under one reading of its cache: one column of the output."""

    family: Family
    reading: str  # a key of LOOKBACKS, or "" for a family with one reading

    @property
    def name(self) -> str:
        return f"{self.family.name}/{self.reading}" if self.reading else self.family.name

    def cache(self) -> LineCache:
        return LineCache(self)


ANTHROPIC_FORMATS = ("anthropic",)
OPENAI_FORMATS = ("chat", "responses")

FAMILIES: tuple[Family, ...] = (
    Family("sonnet", "Sonnet-class", "claude-sonnet-4-5", ANTHROPIC_FORMATS,
           ANTHROPIC_BREAKPOINTS, 0.1, 1.25, 2.0, 1024),
    Family("opus_5_5", "Opus 5.5", "claude-opus-5-5", ANTHROPIC_FORMATS,
           ANTHROPIC_BREAKPOINTS, 0.05, 1.25, 2.0, 512),
    Family("fable_5_1", "Fable 5.1", "claude-fable-5-1", ANTHROPIC_FORMATS,
           ANTHROPIC_BREAKPOINTS, 0.025, 1.25, 2.0, 512),
    Family("gpt_5", "OpenAI 0.1 before GPT-5.6", "gpt-5", OPENAI_FORMATS,
           OPENAI_PREFIX_STEPS, 0.1, 1.0, 1.0, 1024, 128),
    Family("gpt_4o", "OpenAI 0.5", "gpt-4o", OPENAI_FORMATS,
           OPENAI_PREFIX_STEPS, 0.5, 1.0, 1.0, 1024, 128),
    Family("gpt_5_6", "GPT-5.6", "gpt-5.6", OPENAI_FORMATS,
           OPENAI_PREFIX, 0.1, 1.25, 1.25, 1024, 1),
    # The session's own model: whatever the proxy's table makes of it, the
    # provider caches nothing.
    Family("no_cache", "no cache", None, OPENAI_FORMATS, NO_CACHE),
)
FAMILY_NAMES = tuple(family.name for family in FAMILIES)
LINES: tuple[Line, ...] = tuple(line for family in FAMILIES for line in family.lines())
LINE_NAMES = tuple(line.name for line in LINES)


def families_of(fmt: str, chosen: Sequence[Family] = FAMILIES) -> tuple[Family, ...]:
    return tuple(family for family in chosen if fmt in family.formats)


def choose_families(names: Sequence[str]) -> tuple[Family, ...]:
    """The families named (all for none); ValueError for a name no family has."""
    if not names:
        return FAMILIES
    unknown = [name for name in names if name not in FAMILY_NAMES]
    if unknown:
        raise ValueError(f"unknown famil{'ies' if len(unknown) > 1 else 'y'} "
                         f"{', '.join(unknown)} (known: {', '.join(FAMILY_NAMES)})")
    return tuple(family for family in FAMILIES if family.name in names)


class LineCache:
    """One line's cache for the requests of one replay, and what each costs."""

    def __init__(self, line: Line) -> None:
        family = self.family = line.family
        self._anthropic = (AnthropicCache(family.minimum, LOOKBACKS[line.reading])
                           if family.cache == ANTHROPIC_BREAKPOINTS else None)
        self._openai = (OpenAICache(minimum=family.minimum, step=family.step)
                        if family.cache in (OPENAI_PREFIX_STEPS, OPENAI_PREFIX) else None)

    def cost(self, prompt: Prompt) -> tuple[float, int]:
        """(what ``prompt`` costs, the tokens read from the cache); the
        cache then holds what the request wrote."""
        family = self.family
        if self._anthropic is not None:
            spent: AnthropicRequest = self._anthropic.request(prompt)
            return (family.read * spent.read + family.write * spent.written
                    + family.write_1h * spent.written_1h + PLAIN_INPUT * spent.plain,
                    spent.read)
        if self._openai is not None:
            read = self._openai.request(prompt)
            return family.read * read + family.write * (prompt.total - read), read
        return PLAIN_INPUT * prompt.total, 0


def table_agreement(table: ModelTable | None = None) -> dict[str, dict[str, object]]:
    """Per family with a model id: the proxy's table's row for that id, and
    whether its terms are the replay's (read, write, 1-hour write, minimum,
    cache rule)."""
    table = table or ModelTable.shipped()
    out: dict[str, dict[str, object]] = {}
    for family in FAMILIES:
        if family.model is None:
            continue
        choice = table.choose(family.provider, family.model)
        row = choice.row
        same = (choice.known and row.cache == family.cache
                and row.read == round(family.read * PRICE_UNIT)
                and row.write == round(family.write * PRICE_UNIT)
                and row.minimum == family.minimum
                and (family.cache != ANTHROPIC_BREAKPOINTS
                     or row.write_1h == round(family.write_1h * PRICE_UNIT)))
        out[family.name] = {"model": family.model, "table_row": row.name,
                            "known": choice.known, "same_terms": same}
    return out
