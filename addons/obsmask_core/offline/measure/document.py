"""The JSON document of ``measure.py --json``.

Two kinds of keys: the figures, which depend only on the client's requests
and the settings; and, under the keys ``file`` and ``recorded``, what the
inputs themselves say: their names, how the proxy treated each request when
it was recorded, and the provider's own figures. A session recorded through
obsmask and the same session recorded without it give the same document
but for those keys.
"""

from __future__ import annotations

from obsmask_core.offline.cache.billing import base_price, benchmark_name, model_rule
from obsmask_core.offline.cache.policy_json import policy_settings
from obsmask_core.offline.measure.bill import RequestEstimate
from obsmask_core.offline.measure.comparison import RequestComparison
from obsmask_core.offline.measure.figures import (
    REPORTED_MODELS,
    Bill,
    ConversationFigures,
    TokenFigures,
    TotalFigures,
)
from obsmask_core.offline.measure.inputs import InputSummary
from obsmask_core.offline.measure.run import TOKEN_ENCODING, Measurement
from obsmask_core.offline.measure.usage import ProviderTokens, cache_rule
from obsmask_core.offline.proxy_settings import ProxySettings
from obsmask_core.shared.request_record import Action

Json = dict[str, object]

WHAT = (
    "Estimates from a replay, not a provider's bill: each conversation is replayed request "
    "by request, masked as the proxy masks it with these settings, and billed under each "
    "price model with an estimate of the provider's prompt cache; tokens are counted with "
    f"{TOKEN_ENCODING}. A bill is in input tokens at the base input price."
)


def _bill(bill: Bill) -> Json:
    ratio = bill.ratio
    return {"without_obsmask": round(bill.without, 1), "with_obsmask": round(bill.with_obsmask, 1),
            "ratio": round(ratio, 4) if ratio is not None else None,
            "saved": round(bill.saved, 1)}


def _bills(bills: dict[str, Bill]) -> Json:
    return {name: _bill(bill) for name, bill in bills.items()}


def _tokens(tokens: TokenFigures) -> Json:
    return {
        "input_tokens": {"without_obsmask": tokens.input_tokens[0],
                         "with_obsmask": tokens.input_tokens[1]},
        "cached_tokens": {rule: {"without_obsmask": pair[0], "with_obsmask": pair[1]}
                          for rule, pair in tokens.cached.items()},
        "tool_results_last_request": tokens.tool_results_last_request,
        "masked_results_last_request": tokens.masked_last_request,
    }


def _settings(settings: ProxySettings) -> Json:
    return {
        "line": settings.line,
        "source": settings.source,
        "price_model": settings.policy.price_model,
        "policy": policy_settings(settings.policy),
        "ignored_options": list(settings.ignored),
    }


def _price_models(settings: ProxySettings) -> Json:
    return {
        model.name: {
            "replay_model": benchmark_name(model.prices),
            "read": base_price(model.prices.read),
            "uncached": base_price(model.prices.uncached),
            "cache_rule": model_rule(model.prices),
            "description": model.description,
            "sensitivity": model.sensitivity,
            "obsmask_decisions": (not model.sensitivity
                                  and model.name == settings.policy.price_model),
        }
        for model in REPORTED_MODELS
    }


def _attributes(figures: object, *names: str) -> Json:
    """The attributes ``names`` of ``figures``, each under its own name."""
    return {name: getattr(figures, name) for name in names}


def _input(summary: InputSummary) -> Json:
    return {
        **_attributes(summary, "file", "kind", "http_requests", "conversation_requests"),
        "skipped": dict(summary.skipped),
        "recorded": _attributes(summary, "from_backup", "masked_when_recorded",
                                "with_provider_usage"),
    }


def _estimate(estimate: RequestEstimate | None, rule: str) -> Json | None:
    if estimate is None:
        return None
    return {"input_tokens": estimate.input_tokens, "cached_tokens": estimate.cached[rule]}


def _provider(tokens: ProviderTokens) -> Json:
    return {"prompt_tokens": tokens.prompt, "cached_tokens": tokens.cached,
            "cache_creation_tokens": tokens.written}


def _sum(values: list[int | None]) -> int | None:
    return sum(v for v in values if v is not None) if any(v is not None for v in values) else None


def _comparison(found: list[RequestComparison], rule: str) -> Json | None:
    """The provider's figures and the replay's, summed over the requests
    that have both, and request by request."""
    if not found:
        return None
    paired = [c for c in found if c.without is not None and c.with_obsmask is not None]
    return {
        "cache_rule": rule,
        "requests": len(found),
        "masked_when_recorded": sum(c.request.action == Action.MASKED for c in found),
        "paired_with_the_replay": len(paired),
        "provider": {
            "prompt_tokens": sum(c.provider.prompt for c in paired),
            "cached_tokens": sum(c.provider.cached for c in paired),
            "cache_creation_tokens": _sum([c.provider.written for c in paired]),
        },
        "estimate_without_obsmask": {
            "input_tokens": sum(c.without.input_tokens for c in paired if c.without),
            "cached_tokens": sum(c.without.cached[rule] for c in paired if c.without),
        },
        "estimate_with_obsmask": {
            "input_tokens": sum(c.with_obsmask.input_tokens for c in paired if c.with_obsmask),
            "cached_tokens": sum(c.with_obsmask.cached[rule] for c in paired if c.with_obsmask),
        },
        "per_request": [
            {
                "file": c.request.file,
                "flow": c.request.flow,
                "request": c.replayed + 1 if c.replayed is not None else None,
                "action": c.request.action,
                "provider": _provider(c.provider),
                "estimate_without_obsmask": _estimate(c.without, rule),
                "estimate_with_obsmask": _estimate(c.with_obsmask, rule),
            }
            for c in found
        ],
    }


def _conversation(figures: ConversationFigures) -> Json:
    conversation = figures.conversation
    fmt = conversation.session.fmt
    return {
        "number": conversation.number,
        "conversation": conversation.name,
        "format": fmt.name,
        "requests": figures.requests,
        "recorded_requests": len(conversation.requests),
        "last_request": {"file": conversation.last.file, "flow": conversation.last.flow},
        "held_out": figures.held_out,
        "bill": _bills(figures.bills),
        "worst_so_far": {
            name: {"ratio": round(worst[0], 4), "request": worst[1]} if worst else None
            for name, worst in figures.worst_so_far.items()
        },
        "tokens": _tokens(figures.tokens),
        "recorded": {
            "masked_when_recorded": sum(r.action == Action.MASKED for r in conversation.requests),
            "provider": _comparison(figures.comparisons, cache_rule(fmt)),
        },
    }


def _total(total: TotalFigures) -> Json:
    return {
        **_attributes(total, "conversations", "requests", "recorded_requests"),
        "held_out_conversations": total.held_out,
        "bill": _bills(total.bills),
        # The bill of the conversations not held out (holdout_percent): the
        # held-out ones, unmasked, are in "bill" too.
        "not_held_out": {"conversations": total.conversations - total.held_out,
                         "bill": _bills(total.not_held_out_bills)},
        "tokens": _tokens(total.tokens),
    }


def json_document(measurement: Measurement) -> Json:
    settings = measurement.settings
    return {
        "what": WHAT,
        "settings": _settings(settings),
        "price_models": _price_models(settings),
        "token_encoding": TOKEN_ENCODING,
        "inputs": [_input(summary) for summary in measurement.inputs],
        "total": _total(measurement.total),
        "proxy_bill": list(measurement.proxy_bill),
        "conversations": [_conversation(figures) for figures in measurement.conversations],
    }
