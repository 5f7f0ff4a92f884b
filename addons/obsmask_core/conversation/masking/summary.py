"""What one request's masking did, as the flow's metadata and comment say it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from obsmask_core.conversation.masking.outcomes import Masked
from obsmask_core.conversation.planning.plan import RECALLED, MaskPlan
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.shared.request_record import Action, Key
from obsmask_core.shared.tokens import TokenCounter


def _number(value: int | None) -> str:
    return f"{value:,}" if value is not None else "n/a"


@dataclass(frozen=True)
class MaskSummary:
    """A masked request. ``masked_tokens_*`` count the masked results' text
    before and after (None while no encoding is loaded: ``token_encoding``
    says which, or why none). A text not counted before is estimated from
    its length rather than counted while the request waits
    (``tokens_estimated``); it is counted in the background for the next
    request of the conversation, which carries it again."""

    format: str
    masked_tool_results: int
    clipped_tool_results: int
    stage: str
    frontier_turn: int
    tool_results: int
    tool_turns: int
    kept: dict[str, int]
    tool_chars_before: int
    tool_chars_after: int
    masked_tokens_before: int | None
    masked_tokens_after: int | None
    token_encoding: str
    body_bytes_before: int
    body_bytes_after: int
    window_turns: int
    # The policy's other judgements of a move the report replays it under.
    min_chars: int = 0
    payback_factor: int = 0
    # The ledger's bill so far (estimates), when a price model with a cache is set.
    bill: dict[str, object] | None = None
    # Recall stubs replaced by the text they asked for.
    recalled_tool_results: int = 0
    # The conversation's name (a hash of its first user message).
    conversation: str | None = None
    # Which run of it (a hash of the model's first answer).
    session: str | None = None
    # Milliseconds the rewrite took (parse, plan, splice, verify).
    mask_ms: float | None = None
    tokens_estimated: bool = False
    # The body is the previous request's masked body with this one's new
    # items (``previous_requests``): not searched, spliced or parsed again.
    reused_previous_body: bool = False
    # The cache breakpoint obsmask added (Anthropic): which message and
    # block, and the cache_control copied from the client's.
    frontier_breakpoint: dict[str, object] | None = None
    # Calls the model made again once masking took their result
    # (``shared.refetch_facts.RefetchFacts``), when the conversation has any.
    refetches: dict[str, object] | None = None

    @classmethod
    def of(cls, outcome: Masked, fmt: str, tokens: TokenCounter, policy: MaskPolicy,
           body_bytes_before: int, body_bytes_after: int,
           mask_ms: float | None = None, *, exact_tokens: bool = False) -> MaskSummary:
        """``exact_tokens`` counts every text on the spot (nobody waits)."""
        plan = outcome.plan
        shortened = [d for d in plan.decisions if d.kind != RECALLED]
        before = tokens.count_or_estimate((d.original for d in shortened), exact=exact_tokens)
        after = tokens.count_or_estimate((d.new_text for d in shortened), exact=exact_tokens)
        return cls(
            format=fmt,
            masked_tool_results=plan.masked,
            clipped_tool_results=plan.clipped,
            stage=plan.stage,
            frontier_turn=plan.frontier_turn,
            tool_results=plan.tool_results,
            tool_turns=plan.tool_turns,
            kept={reason: count for reason, count in sorted(plan.kept.items())},
            tool_chars_before=outcome.tool_chars_before,
            tool_chars_after=outcome.tool_chars_after,
            masked_tokens_before=before.tokens if before is not None else None,
            masked_tokens_after=after.tokens if after is not None else None,
            token_encoding=tokens.encoding_label,
            body_bytes_before=body_bytes_before,
            body_bytes_after=body_bytes_after,
            window_turns=policy.window_turns,
            min_chars=policy.min_chars,
            payback_factor=policy.payback_factor,
            bill=plan.bill.as_metadata() if plan.bill is not None else None,
            recalled_tool_results=plan.recalled,
            conversation=plan.conversation,
            session=plan.session,
            mask_ms=mask_ms,
            tokens_estimated=any(c is not None and c.estimated for c in (before, after)),
            reused_previous_body=outcome.reused,
            frontier_breakpoint=plan.breakpoint.as_metadata()
            if plan.breakpoint is not None else None,
            refetches=plan.refetches.as_metadata() if plan.refetches else None,
        )

    def as_metadata(self) -> dict[str, object]:
        out: dict[str, object] = {Key.ACTION: Action.MASKED, **_values(self)}
        if self.bill is None:
            del out[Key.BILL]  # no price model with a cache: no ledger
        if not self.recalled_tool_results:
            del out[Key.RECALLED_TOOL_RESULTS]  # recall off, or nothing recalled
        if not self.tokens_estimated:
            del out[Key.TOKENS_ESTIMATED]
        if not self.reused_previous_body:
            del out[Key.REUSED_PREVIOUS_BODY]
        return _without_none(out, Key.CONVERSATION, Key.SESSION, Key.MASK_MS,
                             Key.FRONTIER_BREAKPOINT, Key.REFETCHES)

    def comment_line(self) -> str:
        clipped = self.clipped_tool_results
        recalled = self.recalled_tool_results
        refetched = self.refetches.get("new_calls") if self.refetches else None
        return (
            (f"re-fetch of a masked result: {', '.join(map(str, refetched))}; "
             if isinstance(refetched, list) and refetched else "")
            + (f"recalled {recalled}, " if recalled else "")
            + f"masked {self.masked_tool_results} of {self.tool_results} "
            + (f"and clipped {clipped} " if clipped else "")
            + f"tool results: tool chars {_number(self.tool_chars_before)} -> "
            f"{_number(self.tool_chars_after)}, tokens of the masked results "
            f"{_number(self.masked_tokens_before)} -> {_number(self.masked_tokens_after)} "
            f"({self.token_encoding}{', estimated' if self.tokens_estimated else ''})"
        )


@dataclass(frozen=True)
class LeftAlone:
    """A request that went out as it came: ``passed_through`` when it could
    not be masked (the reason is worth a warning), ``unchanged`` when there
    was nothing to do."""

    action: Literal["passed_through", "unchanged"]
    format: str
    reason: str
    bill: dict[str, object] | None = None
    # The conversation is in the holdout group (holdout_percent): never masked.
    holdout: bool = False
    conversation: str | None = None
    mask_ms: float | None = None
    refetches: dict[str, object] | None = None
    # Why nothing was masked, in a user's words (view/unmasked.py).
    why: str | None = None
    session: str | None = None

    @classmethod
    def unchanged(cls, fmt: str, reason: str, plan: MaskPlan | None,
                  mask_ms: float | None = None, why: str | None = None) -> LeftAlone:
        if plan is None:
            return cls("unchanged", fmt, reason, mask_ms=mask_ms, why=why)
        bill = plan.bill.as_metadata() if plan.bill is not None else None
        refetches = plan.refetches.as_metadata() if plan.refetches else None
        return cls("unchanged", fmt, reason, bill, plan.held_out, plan.conversation, mask_ms,
                   refetches, why, plan.session)

    def as_metadata(self) -> dict[str, object]:
        out = _values(self)
        if not self.holdout:
            del out[Key.HOLDOUT]
        return _without_none(out, Key.BILL, Key.CONVERSATION, Key.MASK_MS, Key.REFETCHES, Key.WHY,
                             Key.SESSION)


def _values(summary: MaskSummary | LeftAlone) -> dict[str, object]:
    """``dataclasses.asdict``, for these flat records (their dicts hold
    numbers and strings): a copy of each dict, without asdict's deep copy
    of every value, which cost more than the rest of the report."""
    return {field.name: dict(value) if isinstance(value := getattr(summary, field.name), dict)
            else value for field in fields(summary)}


def _without_none(out: dict[str, object], *keys: str) -> dict[str, object]:
    """Metadata keeps only the figures that were taken."""
    for key in keys:
        if out[key] is None:
            del out[key]
    return out


def describe_policy(policy: MaskPolicy, source: str) -> str:
    """The start-up line: what conversation masking will do, and from where."""
    if not policy.enabled:
        return f"conversation masking off (settings: {source})"
    p = policy
    extras = [
        f"{name}={value}"
        for name, value, neutral in (
            ("batch_turns", p.batch_turns, 1),
            ("trigger_tokens", p.trigger_tokens, 0),
            ("min_chars", p.min_chars, 0),
            ("min_free_percent", p.min_free_percent, 0),
            ("payback_factor", p.payback_factor, 0),
            ("max_input_tokens", p.max_input_tokens, 0),
            ("price_model", p.price_model, "none"),
            ("allowance_percent", p.allowance_percent, 0),
            ("frontier_breakpoint", "on" if p.frontier_breakpoint else "off", "off"),
            ("cold_turns", "on" if p.cold_turns_on else "off", "off"),
            ("cold_after_seconds", p.cold_after_seconds, 0),
            ("refetch_guard", "on" if p.refetch_guard else "off", "off"),
            ("holdout_percent", p.holdout_percent, 0),
            ("exclude_tools", ",".join(p.exclude_tools), ""),
        )
        if value != neutral
    ]
    return (
        f"conversation masking on: window {p.window_turns} tool turns, "
        f"keep_errors={'on' if p.keep_errors else 'off'}, "
        f"keep_last_k_per_tool={p.per_tool_keep}"
        + "".join(", " + extra for extra in extras)
        + f" (settings: {source})"
    )
