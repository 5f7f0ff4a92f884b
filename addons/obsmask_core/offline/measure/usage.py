"""The provider's own figures, as obsmask recorded them in a flow
(``flow.metadata["obsmask"]["provider_usage"]``), made comparable with the
replay's estimate.

The providers count alike only in part (see
``obsmask_core.conversation.usage.provider_usage``): OpenAI's ``input_tokens`` is
the whole prompt, ``cached_input_tokens`` the part of it read from the
cache; Anthropic's ``input_tokens`` is only what was neither read from
nor written to its cache, so its prompt is the sum of the three figures.
Each format is compared with the replay's cache rule of its provider:
Anthropic's for Anthropic Messages, OpenAI's for the two OpenAI formats.
Each figure is read with ``obsmask_core.shared.read_back.count``: one that
is no count, or beyond 2**53, is read as not reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.conversation.turns.wire_formats import ANTHROPIC, WireFormat
from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from obsmask_core.offline.cache.model import ANTHROPIC_RULE, OPENAI_RULE
from obsmask_core.shared.read_back import count, mapping
from obsmask_core.shared.request_record import UsageKey


def usage_from_metadata(value: object) -> ProviderUsage | None:
    """The figures of a flow's ``provider_usage``; None when it has none."""
    usage = mapping(value)
    found = ProviderUsage(
        input_tokens=count(usage.get(UsageKey.INPUT_TOKENS)),
        cached_input_tokens=count(usage.get(UsageKey.CACHED_INPUT_TOKENS)),
        cache_creation_input_tokens=count(usage.get(UsageKey.CACHE_CREATION_INPUT_TOKENS)),
        output_tokens=count(usage.get(UsageKey.OUTPUT_TOKENS)))
    return found if found.as_metadata() else None


def cache_rule(fmt: WireFormat) -> str:
    """The replay's cache rule (``obsmask_core.offline.cache.model``) of the format's provider."""
    return ANTHROPIC_RULE if fmt is ANTHROPIC else OPENAI_RULE


@dataclass(frozen=True)
class ProviderTokens:
    """A provider's figures for one request, in the same terms for every format."""

    prompt: int  # every input token of the request
    cached: int  # read from its cache
    written: int | None  # written to it (Anthropic's figure; None: not reported)


def provider_tokens(usage: ProviderUsage, fmt: WireFormat) -> ProviderTokens | None:
    """None when the provider gave no input count."""
    if usage.input_tokens is None:
        return None
    cached = usage.cached_input_tokens or 0
    written = usage.cache_creation_input_tokens
    if fmt is ANTHROPIC:
        return ProviderTokens(usage.input_tokens + cached + (written or 0), cached, written)
    return ProviderTokens(usage.input_tokens, cached, written)
