"""The records obsmask writes into a flow's metadata, their keys declared once.

A conversation request's record (``flow.metadata[CONVERSATION_RECORD]``) is
written by the conversation addon (``MaskSummary`` for a masked request,
``LeftAlone`` for one that went out as it came: their fields are named by
these keys), then completed when the answer comes (the provider's usage,
the brake's figures). An MCP answer's record (``flow.metadata[MCP_RECORD]``)
is written by the MCP addon (``McpSummary``) and the gateway. The proxy's
totals, metrics and content view, the report and measure read them back.

Every module of the package that reads or writes a record names its keys
from here: none spells one (tests/test_layout_records.py checks it). The
values nested under a key are declared here too (the bill, its prediction
and model row, the provider's usage, the brake's figures), but for the
re-fetches, whose value object declares and reads its own
(``refetch_facts``).
"""

from __future__ import annotations

from typing import Final

# The records' places in flow.metadata.
CONVERSATION_RECORD: Final = "obsmask"
MCP_RECORD: Final = "obsmask_mcp"
RECALL_RECORD: Final = "obsmask_recall"


class Key:
    """The keys of a conversation request's record."""

    ACTION: Final = "action"  # what was done: one of ``Action``
    FORMAT: Final = "format"  # the wire format's name (chat, anthropic, responses)
    REASON: Final = "reason"  # why the request went out as it came
    WHY: Final = "why"  # why nothing was masked, in a user's words
    CONVERSATION: Final = "conversation"  # the conversation's name
    SESSION: Final = "session"  # which run of the conversation
    HOLDOUT: Final = "holdout"  # in the holdout group: never masked
    MASKED_TOOL_RESULTS: Final = "masked_tool_results"
    CLIPPED_TOOL_RESULTS: Final = "clipped_tool_results"
    RECALLED_TOOL_RESULTS: Final = "recalled_tool_results"
    STAGE: Final = "stage"
    FRONTIER_TURN: Final = "frontier_turn"
    TOOL_RESULTS: Final = "tool_results"
    TOOL_TURNS: Final = "tool_turns"
    KEPT: Final = "kept"
    TOOL_CHARS_BEFORE: Final = "tool_chars_before"
    TOOL_CHARS_AFTER: Final = "tool_chars_after"
    MASKED_TOKENS_BEFORE: Final = "masked_tokens_before"
    MASKED_TOKENS_AFTER: Final = "masked_tokens_after"
    TOKEN_ENCODING: Final = "token_encoding"
    TOKENS_ESTIMATED: Final = "tokens_estimated"
    BODY_BYTES_BEFORE: Final = "body_bytes_before"
    BODY_BYTES_AFTER: Final = "body_bytes_after"
    WINDOW_TURNS: Final = "window_turns"
    MIN_CHARS: Final = "min_chars"
    PAYBACK_FACTOR: Final = "payback_factor"
    MASK_MS: Final = "mask_ms"
    REUSED_PREVIOUS_BODY: Final = "reused_previous_body"
    FRONTIER_BREAKPOINT: Final = "frontier_breakpoint"
    BILL: Final = "bill"  # the ledger's bill so far (``BillSoFar.as_metadata``)
    REFETCHES: Final = "refetches"  # ``shared.refetch_facts.RefetchFacts``
    # Written when the answer comes.
    PROVIDER_USAGE: Final = "provider_usage"  # ``ProviderUsage.as_metadata``
    PROVIDER_USAGE_PROBLEM: Final = "provider_usage_problem"
    BRAKE: Final = "brake"  # the provider brake's figures for the answer


class Action:
    """What a conversation request's record says was done."""

    MASKED: Final = "masked"
    UNCHANGED: Final = "unchanged"
    PASSED_THROUGH: Final = "passed_through"


class McpKey:
    """The keys of an MCP answer's record."""

    ACTION: Final = "action"  # TRUNCATED when strings were cut
    TRANSPORT: Final = "transport"
    MESSAGES_TRUNCATED: Final = "messages_truncated"
    STRINGS_CUT: Final = "strings_cut"
    CHARS_BEFORE: Final = "chars_before"
    CHARS_AFTER: Final = "chars_after"
    TOKENS_SAVED: Final = "tokens_saved"
    TOKEN_ENCODING: Final = "token_encoding"
    TOKENS_ESTIMATED: Final = "tokens_estimated"
    RECALL_IDS: Final = "recall_ids"
    GATEWAY_SERVER: Final = "gateway_server"
    GATEWAY_UPSTREAM: Final = "gateway_upstream"
    GATEWAY_ERROR: Final = "gateway_error"


TRUNCATED: Final = "truncated"  # an MCP record's action when strings were cut


# The values nested under a conversation record's key, each written by its
# own value object.


class BillKey:
    """The ledger's bill so far (``Key.BILL``: ``BillSoFar.as_metadata``)."""

    PRICE_MODEL: Final = "price_model"
    REQUESTS: Final = "requests"
    ESTIMATED_WITH_MASKING: Final = "estimated_with_masking"
    ESTIMATED_WITHOUT_MASKING: Final = "estimated_without_masking"
    RATIO: Final = "ratio"
    ALLOWANCE_PERCENT: Final = "allowance_percent"
    ALLOWANCE_USED: Final = "allowance_used"
    CACHE: Final = "cache"
    PREDICTED: Final = "predicted"  # ``PredictedKey``
    COLD_ENDS: Final = "cold_ends"
    COLD: Final = "cold"
    DOUBTFUL_ENDS: Final = "doubtful_ends"
    REQUEST_ITEMS: Final = "request_items"
    # This request's own cost: ESTIMATED_WITH_MASKING, ESTIMATED_WITHOUT_MASKING.
    REQUEST: Final = "request"
    HISTORY: Final = "history"
    BRAKED_FROM: Final = "braked_from"
    MODEL_ROW: Final = "model_row"  # ``RowKey``
    MOVED: Final = "moved"


class PredictedKey:
    """What the ledger predicts the provider reports (``BillKey.PREDICTED``)."""

    INPUT_TOKENS: Final = "input_tokens"
    CACHE_READ_TOKENS: Final = "cache_read_tokens"
    CACHE_WRITE_TOKENS: Final = "cache_write_tokens"


class RowKey:
    """The model table's row a request was billed by (``BillKey.MODEL_ROW``)."""

    ROW: Final = "row"
    TABLE_ROW: Final = "table_row"
    MODEL: Final = "model"
    KNOWN: Final = "known"
    CAUTIOUS: Final = "cautious"
    PROVIDER: Final = "provider"
    CACHE: Final = "cache"
    READ: Final = "read"
    WRITE: Final = "write"
    WRITE_1H: Final = "write_1h"
    MINIMUM: Final = "minimum"


class UsageKey:
    """The provider's usage report (``Key.PROVIDER_USAGE``: the fields of
    ``ProviderUsage``)."""

    INPUT_TOKENS: Final = "input_tokens"
    CACHED_INPUT_TOKENS: Final = "cached_input_tokens"
    CACHE_CREATION_INPUT_TOKENS: Final = "cache_creation_input_tokens"
    OUTPUT_TOKENS: Final = "output_tokens"
    CACHE_MISS_REASON: Final = "cache_miss_reason"


class BrakeKey:
    """The provider brake's figures for an answer (``Key.BRAKE``)."""

    SURPRISE: Final = "surprise"
    CONVERSATION_SURPRISE: Final = "conversation_surprise"
    ROOM: Final = "room"
    BRAKED_FROM: Final = "braked_from"
    TRIPPED: Final = "tripped"


def declared(keys: type) -> frozenset[str]:
    """The key strings a class of this module declares."""
    return frozenset(value for name, value in vars(keys).items()
                     if not name.startswith("_") and isinstance(value, str))
