"""One session's figures: every policy's bill, its final ratio to the
baseline's, and its worst ratio so far (``obsmask_core.offline.cache.so_far``).
The figures of each price model go under its name in bench_cache's output
(``obsmask_core.offline.cache.billing.benchmark_name``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NotRequired, TypedDict, TypeVar

from benchlib.cache.policies import BASELINE
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.offline.cache.billing import ALL_MODELS, SessionBill, benchmark_name
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.replay import PolicyRun, replay_policies
from obsmask_core.offline.cache.sessions import Session
from obsmask_core.offline.cache.so_far import ratio_so_far, worst_so_far


class PolicyFigures(TypedDict):
    """One policy on one session, as the JSON output gives it."""

    input_tokens: int
    common_prefix_tokens: int
    cached_tokens: dict[str, int]  # per cache rule: read from the cache
    cache_written_tokens: dict[str, int]  # Anthropic's writes: "5m" and "1h"
    cost: dict[str, float]
    ratio: dict[str, float | None]  # to the baseline's cost, per price model
    # The highest ratio of the bill so far, from request FIRST_JUDGED_REQUEST
    # on, and the number of that request (from 1); None: too few requests.
    worst_prefix_ratio: dict[str, float | None]
    worst_prefix_request: dict[str, int | None]
    # Tool-turn count -> price model -> the bill so far after the request
    # holding that turn's result (only for sessions with checkpoints).
    ratio_at_tool_turns: NotRequired[dict[str, dict[str, float | None]]]
    masked_results_last_request: int
    tool_results_last_request: int
    input_tokens_last_request: int
    # The rewrite's outcomes: masked, unchanged, refused, unreadable.
    outcomes: dict[str, int]
    # Forwarded bodies with more than four breakpoints, and those with a
    # client's breakpoint moved or removed.
    protocol_errors: dict[str, int]


class SessionFigures(TypedDict):
    name: str
    kind: str
    format: str
    requests: int
    messages: int
    policies: dict[str, PolicyFigures]


def ratio(cost: float, baseline: float) -> float | None:
    return cost / baseline if baseline else None


def round_ratio(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


Figure = TypeVar("Figure")


def per_model(figure: Callable[[str], Figure]) -> dict[str, Figure]:
    """``figure`` of each price model (given its name), under the model's
    name in the output."""
    return {benchmark_name(model): figure(model.name) for model in ALL_MODELS}


def _ratios_at(bill: SessionBill, base: SessionBill, turns: int) -> dict[str, float | None]:
    """The bill so far over the baseline's after tool turn ``turns``, per price model."""
    return per_model(lambda model: round_ratio(
        ratio_so_far(bill.so_far[model], base.so_far[model], turns)))


def _policy_figures(session: Session, run: PolicyRun, baseline: PolicyRun) -> PolicyFigures:
    bill, base = run.bill, baseline.bill
    worst = {model: worst_so_far(costs, base.so_far[model]) for model, costs in bill.so_far.items()}
    figures: PolicyFigures = {
        "input_tokens": bill.input_tokens,
        "common_prefix_tokens": bill.common_prefix_tokens,
        "cached_tokens": dict(bill.cached),
        "cache_written_tokens": dict(bill.written),
        "cost": per_model(lambda model: round(bill.cost[model], 1)),
        "ratio": per_model(lambda model: round_ratio(ratio(bill.cost[model], base.cost[model]))),
        "worst_prefix_ratio": per_model(
            lambda model: round_ratio(found[0]) if (found := worst[model]) else None),
        "worst_prefix_request": per_model(
            lambda model: found[1] if (found := worst[model]) else None),
        "masked_results_last_request": run.masked_last_request,
        "tool_results_last_request": run.tool_results_last_request,
        "input_tokens_last_request": run.input_tokens_last_request,
        "outcomes": dict(run.outcomes),
        "protocol_errors": {
            "over_four_breakpoints": run.protocol_errors.over_four_breakpoints,
            "client_breakpoint_moved_or_removed":
                run.protocol_errors.client_breakpoint_moved_or_removed,
        },
    }
    if session.checkpoints:
        # Every answer of these sessions is one tool turn and the first
        # request holds none, so request k + 1 (index k) is the first to hold
        # turn k's result: the last request of the k-turn session.
        figures["ratio_at_tool_turns"] = {
            str(turns): _ratios_at(bill, base, turns)
            for turns in session.checkpoints if turns < len(session.request_ends)
        }
    return figures


def session_figures(session: Session, policies: dict[str, MaskPolicy],
                    tokens: MessageTokens) -> SessionFigures:
    """Every policy's bill on ``session``, and its ratios to the baseline's."""
    runs = replay_policies(session, policies, tokens)
    return {"name": session.name, "kind": session.kind, "format": session.fmt.name,
            "requests": len(session.request_ends), "messages": len(session.messages),
            "policies": {name: _policy_figures(session, run, runs[BASELINE])
                         for name, run in runs.items()}}
