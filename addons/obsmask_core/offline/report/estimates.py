"""A request's input tokens as the cache benchmark bills them: the request sent as
its client sends it (``obsmask_core.offline.cache.clients``: an Anthropic one with
Claude Code's breakpoints) and read block by block in cache order
(``obsmask_core.offline.cache.prompts``): the cl100k_base tokens of each block, a few
framing tokens a message, the reply-priming tokens. The bill
(``obsmask_core.offline.cache.replay``) counts a request the same way, so a request's
tokens here are what the bill without a cache charges for it."""

from __future__ import annotations

from obsmask_core.conversation.turns.wire_formats import WireFormat
from obsmask_core.offline.cache.block_tokens import MessageTokens
from obsmask_core.offline.cache.clients import ClientRequests
from obsmask_core.offline.cache.prompts import ItemReadings, PromptReader
from obsmask_core.offline.cache.sessions import Session
from obsmask_core.offline.report.conversations import ParsedBody


def prompt_tokens(body: ParsedBody, fmt: WireFormat, tokens: MessageTokens) -> int:
    client = ClientRequests(Session("request", "input", body.items, fmt=fmt,
                                    preamble=body.preamble, members=body.members))
    sent = client.request(len(body.items))
    reading = PromptReader(ItemReadings(fmt, tokens, client.items)).read(sent.request)
    return reading.prompt(0.0, None).total
