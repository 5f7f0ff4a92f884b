"""A request's input tokens as bench_cache estimates them
(``benchlib.cache.tokens``): per item of the conversation list, and for
Anthropic's ``system`` or Responses' ``instructions`` as one item in front,
a few framing tokens and the cl100k_base tokens of its strings; then the
reply-priming tokens. Tool definitions are left out. The bill
(``benchlib.cache.replay``) counts a request the same way."""

from __future__ import annotations

from benchlib.cache.tokens import MessageTokens
from benchlib.report.conversations import ParsedBody
from obsmask_core.shared.tokens import TOKENS_REPLY_PRIMING


def prompt_tokens(body: ParsedBody, tokens: MessageTokens) -> int:
    front = [body.preamble] if body.preamble is not None else []
    return sum(len(tokens.segment(item)[1]) for item in [*front, *body.items]) + (
        TOKENS_REPLY_PRIMING)
