"""What the rules that look at a tool result alone make of it: why it is
kept whatever its age, or the text it is masked to. The planner judges each
result once (``planner``); the kept requests hold their results' judgements
for the next request of the conversation (``previous_requests``)."""

from __future__ import annotations

from typing import Literal

# Why a result was kept: inside the window; older than the window but not
# yet past the frontier; reads as an error; among the last K of its tool;
# its tool is excluded; shorter than min_chars; already the placeholder;
# the placeholder would not be shorter; no text to replace; no call names it;
# masking it would have cost more than the bill allowed when it was judged;
# the model fetched it again once it was masked (``refetch``).
KeptReason = Literal["in_window", "pending", "cache", "error", "per_tool", "excluded", "min_chars",
                     "already_masked", "short", "not_text", "orphan", "refetched"]

# (reason kept, None) or (None, masked text).
Judgement = tuple[KeptReason, None] | tuple[None, str]
