"""What the conversation addon hands to its rewrite (maybe on the worker
thread) and what it gets back."""

from __future__ import annotations

from dataclasses import dataclass

from mitmproxy import http

from obsmask_core.conversation.billing.last_seen import Visit
from obsmask_core.conversation.masking.masker import Masker
from obsmask_core.conversation.masking.outcomes import RewriteOutcome
from obsmask_core.conversation.masking.summary import MaskSummary
from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.mitm.body_encoding import EncodedBody


@dataclass(frozen=True)
class Rewrite:
    """One request to rewrite, with the settings in force when it came."""

    request: http.Request
    fmt: WireFormat
    masker: Masker
    recall: bool
    exact_tokens: bool
    # When the request came, for the table of when conversations were last
    # seen (used with cold_after_seconds).
    visit: Visit


@dataclass(frozen=True)
class Rewritten:
    """What the rewrite made of a request: for a masked one, its new body
    (encoded as the client's was, with its headers) and the summary."""

    outcome: RewriteOutcome
    mask_ms: float
    body: EncodedBody | None = None
    summary: MaskSummary | None = None
