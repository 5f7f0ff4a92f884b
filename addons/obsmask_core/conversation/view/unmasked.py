"""Why a conversation request went out with nothing masked, in a user's
words, from its plan: the one line the proxy logs per conversation and
reason, and the ``why`` of its flow."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from obsmask_core.conversation.planning.judgements import KeptReason
from obsmask_core.conversation.planning.plan import MaskPlan

# The results past the window, by why they stayed, in a short phrase each.
_PAST_THE_WINDOW: Mapping[KeptReason, str] = MappingProxyType({
    "pending": "waiting for the frontier (the ledger, trigger_tokens, batch_turns, "
               "min_free_percent or payback_factor: masking now would not pay yet under "
               "the prompt cache)",
    "cache": "kept for good (masking them would cost more than the prompt cache saves)",
    "refetched": "kept since the model called for them again (re-fetch guard)",
    "error": "read as errors (keep_errors)",
    "per_tool": "among the latest of their tool (keep_last_k_per_tool)",
    "excluded": "of excluded tools (exclude_tools)",
    "min_chars": "shorter than min_chars",
    "short": "no longer than the placeholder",
    "not_text": "with no text to replace",
    "already_masked": "already placeholders",
    "orphan": "answering no earlier call",
})


@dataclass(frozen=True)
class WhyUnmasked:
    """``kind``: one word for the reason (the log says each kind once per
    conversation); ``text``: the reason, with its figures."""

    kind: str
    text: str


def why_unmasked(plan: MaskPlan, window_turns: int) -> WhyUnmasked:
    """Why ``plan`` masks nothing."""
    if plan.held_out:
        return WhyUnmasked("held_out", "held out: the conversation is in the group left "
                           "unmasked for comparison (holdout_percent)")
    if not plan.tool_results:
        return WhyUnmasked("no_results", "no tool result yet")
    past = Counter({reason: count for reason, count in plan.kept.items()
                    if count and reason != "in_window"})
    if not past:
        return WhyUnmasked("in_window", f"nothing old enough: {plan.tool_results} tool "
                           f"result(s), all inside the window of {window_turns} tool turn(s)")
    parts = [f"{count} {_PAST_THE_WINDOW.get(reason, reason)}"
             for reason, count in past.most_common()]
    kind = past.most_common(1)[0][0]
    return WhyUnmasked(kind, f"{sum(past.values())} tool result(s) past the window kept: "
                       + "; ".join(parts))


# Conversations and reasons told of at most (a client may start any number).
TOLD_AT_MOST = 10_000


class UnmaskedReasons:
    """Each request's reason, and whether it is news: the first time its
    conversation is left unmasked for this kind of reason."""

    def __init__(self, at_most: int = TOLD_AT_MOST) -> None:
        self._told: set[tuple[str, str]] = set()
        self._at_most = at_most

    def of(self, plan: MaskPlan | None, window_turns: int) -> tuple[str | None, bool]:
        """Why ``plan`` masks nothing (None without a plan: masking off),
        and whether that is news (then it is remembered)."""
        if plan is None:
            return None, False
        why = why_unmasked(plan, window_turns)
        key = (plan.conversation or "", why.kind)
        if not plan.conversation or key in self._told or len(self._told) >= self._at_most:
            return why.text, False
        self._told.add(key)
        return why.text, True
