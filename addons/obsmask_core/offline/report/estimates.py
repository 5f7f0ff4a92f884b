"""A request's input tokens as bench_cache bills them: the request sent as
its client sends it (``benchlib.cache.clients``: an Anthropic one with
Claude Code's breakpoints) and read block by block in cache order
(``benchlib.cache.prompts``): the cl100k_base tokens of each block, a few
framing tokens a message, the reply-priming tokens. The bill
(``benchlib.cache.replay``) counts a request the same way, so a request's
tokens here are what the bill without a cache charges for it."""

from __future__ import annotations

from benchlib.cache.clients import ClientRequests
from benchlib.cache.prompts import ItemReadings, PromptReader
from benchlib.cache.sessions import Session
from benchlib.cache.tokens import MessageTokens
from benchlib.report.conversations import ParsedBody
from obsmask_core.conversation.wire_formats import WireFormat


def prompt_tokens(body: ParsedBody, fmt: WireFormat, tokens: MessageTokens) -> int:
    client = ClientRequests(Session("request", "input", body.items, fmt=fmt,
                                    preamble=body.preamble))
    sent = client.request(len(body.items))
    reading = PromptReader(ItemReadings(fmt, tokens, client.items)).read(sent.request)
    return reading.prompt(0.0, None).total
