"""The token usage a provider reports in its answer: what it is, and how it
is read from a JSON answer or from one event of a streamed answer.

A user checks what masking did to the provider's prompt cache with the
figures the provider itself reports per answer: the input tokens it counted,
the part of them read from its cache (OpenAI's
``usage.prompt_tokens_details.cached_tokens``, Anthropic's
``cache_read_input_tokens``) and, for Anthropic, the part written to it
(``cache_creation_input_tokens``). A streamed answer reports them in its
last events. This module reads those numbers without mitmproxy:

* :func:`usage_from_json` reads a buffered (non-streamed) JSON answer;
* :func:`usage_in_object` reads a parsed answer or stream event;
* ``obsmask_core.conversation.usage.usage_stream`` reads a streamed
  (``text/event-stream``) answer with them.

The three wire formats put usage in these places (shapes checked against the
``openai`` 3.54 and ``anthropic`` 2.12 SDK type definitions):

=====================  ===========================================  ==========================
format                 buffered answer                              streamed answer
=====================  ===========================================  ==========================
OpenAI Chat            ``usage`` (``CompletionUsage``)              ``usage`` of the last
                                                                    ``chat.completion.chunk``
                                                                    (needs
                                                                    ``stream_options.
                                                                    include_usage``)
OpenAI Responses       ``usage`` (``ResponseUsage``)                ``response.usage`` of
                                                                    ``response.completed``
                                                                    (also ``.incomplete``,
                                                                    ``.failed``)
Anthropic Messages     ``usage`` (``Usage``)                        ``message.usage`` of
                                                                    ``message_start``, then
                                                                    ``usage`` of
                                                                    ``message_delta``
=====================  ===========================================  ==========================

Nothing here raises on bad input: a body that is not what we expect gives
``None`` (no usage), because usage figures are a diagnostic and must never
disturb the traffic they describe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from typing import TypeVar

_T = TypeVar("_T")


@dataclass(frozen=True)
class ProviderUsage:
    """Token counts as the provider reported them; None when not reported.

    The numbers are kept as the provider sent them, and the providers do not
    count alike:

    * OpenAI (Chat ``prompt_tokens``, Responses ``input_tokens``):
      ``input_tokens`` is all the prompt, cached tokens included, and
      ``cached_input_tokens`` (``cached_tokens``) is the part of it that was
      read from the cache;
    * Anthropic: ``input_tokens`` counts only the tokens that were neither
      read from nor written to the cache; the prompt is
      ``input_tokens + cached_input_tokens + cache_creation_input_tokens``
      (``cache_read_input_tokens`` and ``cache_creation_input_tokens``).

    ``cache_creation_input_tokens`` is read from Anthropic answers, and
    from OpenAI's ``cache_write_tokens`` (GPT-5.6 and later), which its
    ``input_tokens`` include.
    """

    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    output_tokens: int | None = None
    # Why the provider's cache missed, where the answer says so (its cache
    # diagnostics, which only a client that asks for them gets: Anthropic's
    # ``diagnostics.cache_miss_reason``, OpenAI's ``prompt_cache_diagnostics``).
    cache_miss_reason: str | None = None

    def as_metadata(self) -> dict[str, int | str]:
        """The reported fields only, by name: ready for flow metadata or JSON."""
        out: dict[str, int | str] = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, (int, str)):
                out[field.name] = value
        return out

    def comment_line(self) -> str:
        """The usage as one line of the flow's comment."""
        return (
            f"obsmask: provider reported {_figure(self.input_tokens)} input tokens, "
            f"{_figure(self.cached_input_tokens)} read from its cache"
            + (
                f", {_figure(self.cache_creation_input_tokens)} written to it"
                if self.cache_creation_input_tokens is not None
                else ""
            )
        )

    def updated_by(self, later: ProviderUsage) -> ProviderUsage:
        """This usage with every field that ``later`` reports replaced.

        A stream reports usage in pieces (Anthropic's ``message_start`` has
        the input figures, ``message_delta`` the final output count and, in
        newer API versions, cumulative input figures too): the later value
        of a field is the more complete one, and a field the later piece
        leaves out keeps its earlier value.
        """
        return ProviderUsage(
            input_tokens=_later(self.input_tokens, later.input_tokens),
            cached_input_tokens=_later(self.cached_input_tokens, later.cached_input_tokens),
            cache_creation_input_tokens=_later(
                self.cache_creation_input_tokens, later.cache_creation_input_tokens
            ),
            output_tokens=_later(self.output_tokens, later.output_tokens),
            cache_miss_reason=_later(self.cache_miss_reason, later.cache_miss_reason),
        )


def _figure(value: int | None) -> str:
    return f"{value:,}" if value is not None else "n/a"


def _later(earlier: _T | None, later: _T | None) -> _T | None:
    return earlier if later is None else later


def usage_from_json(body: bytes) -> ProviderUsage | None:
    """The usage of a buffered JSON answer of any of the three formats.

    The format is recognised by the shape of the ``usage`` object, so the
    caller needs no routing. Gives None when the body is not JSON, not an
    object, or reports no usage (an error answer, say). The body must be
    already decoded (mitmproxy's ``response.content`` undoes
    Content-Encoding). The data of a single stream event is accepted too.
    """
    try:
        parsed: object = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return usage_in_object(parsed)


# Stream events after which a provider reports no more usage: the Responses
# API's last event, and Anthropic's message_delta (the final output count;
# message_stop carries none). A Chat Completions chunk has no "type": the
# last before [DONE] carries a usage object and no choices (some servers,
# vLLM's continuous usage stats, put a usage object on every chunk too).
FINAL_USAGE_EVENTS = frozenset({
    "response.completed", "response.incomplete", "response.failed", "message_delta",
})


def ends_usage_report(event: object) -> bool:
    """Whether a parsed stream event is the one that completes the usage
    report (see FINAL_USAGE_EVENTS); its usage is then final."""
    if not isinstance(event, dict):
        return False
    kind = event.get("type")
    if kind is None:
        return isinstance(event.get("usage"), dict) and not event.get("choices")
    return kind in FINAL_USAGE_EVENTS


def usage_in_object(obj: object) -> ProviderUsage | None:
    """The usage carried by a parsed answer or stream event, if any.

    Looks at ``usage`` (a buffered answer of any format, an OpenAI Chat
    chunk, an Anthropic ``message_delta``), ``message.usage`` (Anthropic's
    ``message_start``) and ``response.usage`` (the Responses API's
    ``response.completed``/``.incomplete``/``.failed``); if several are
    there, later ones in that order win field by field.
    """
    if not isinstance(obj, dict):
        return None
    found: ProviderUsage | None = None
    reason: str | None = None
    for holder in (obj, _dict_at(obj, "message"), _dict_at(obj, "response")):
        if holder is None:
            continue
        usage = _read_usage(holder.get("usage"))
        if usage is not None:
            found = usage if found is None else found.updated_by(usage)
        reason = _later(reason, miss_reason(holder))
    if reason is not None:
        found = replace(found or ProviderUsage(), cache_miss_reason=reason)
    return found


# A reason is a short word of the provider's ("messages_changed"); longer
# text is cut, so flow metadata and totals stay small.
REASON_CHARS = 64


def miss_reason(holder: dict[str, object]) -> str | None:
    """The cache miss reason an answer (or its ``message``, ``response``)
    carries in its diagnostics: Anthropic's ``diagnostics.cache_miss_reason``
    (an object whose ``type`` names it), OpenAI's
    ``prompt_cache_diagnostics`` (its ``cache_miss_reason``, ``reason`` or
    ``type``, or the value itself when a string)."""
    for value in (_dict_at(holder, "diagnostics") or {}).get("cache_miss_reason"), \
            holder.get("prompt_cache_diagnostics"):
        if isinstance(value, dict):
            value = next((value[key] for key in ("cache_miss_reason", "reason", "type")
                          if isinstance(value.get(key), (str, dict))), None)
            if isinstance(value, dict):
                value = value.get("type")
        if isinstance(value, str) and value:
            return value[:REASON_CHARS]
    return None


def _read_usage(raw: object) -> ProviderUsage | None:
    """One ``usage`` object of any of the three formats, or None if it has no count.

    Chat names its counts ``prompt_tokens``/``completion_tokens`` with
    ``prompt_tokens_details.cached_tokens``; Responses ``input_tokens``/
    ``output_tokens`` with ``input_tokens_details.cached_tokens``; Anthropic
    ``input_tokens``/``output_tokens`` with ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``; OpenAI's writes (GPT-5.6 on) are
    ``cache_write_tokens`` beside ``cached_tokens``. The names do not collide, so the first
    name present wins and no format switch is needed.
    """
    if not isinstance(raw, dict):
        return None
    usage = ProviderUsage(
        input_tokens=_first(_count(raw, "prompt_tokens"), _count(raw, "input_tokens")),
        cached_input_tokens=_first(
            _count(_dict_at(raw, "prompt_tokens_details"), "cached_tokens"),
            _count(_dict_at(raw, "input_tokens_details"), "cached_tokens"),
            _count(raw, "cache_read_input_tokens"),
        ),
        cache_creation_input_tokens=_first(
            _count(raw, "cache_creation_input_tokens"),
            _count(_dict_at(raw, "prompt_tokens_details"), "cache_write_tokens"),
            _count(_dict_at(raw, "input_tokens_details"), "cache_write_tokens"),
        ),
        output_tokens=_first(_count(raw, "completion_tokens"), _count(raw, "output_tokens")),
    )
    return usage if usage.as_metadata() else None


def _first(*values: int | None) -> int | None:
    for value in values:
        if value is not None:
            return value
    return None


def _dict_at(obj: dict[str, object], key: str) -> dict[str, object] | None:
    value = obj.get(key)
    return value if isinstance(value, dict) else None


def _count(obj: dict[str, object] | None, key: str) -> int | None:
    """A token count: a non-negative JSON integer (not a bool, not a float)."""
    if obj is None:
        return None
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
