"""One measurement: the inputs read with the settings' routes, grouped
into conversations, each replayed without and with obsmask, and the
figures per conversation and in total."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.measure.bill import bill_conversation
from obsmask_core.offline.measure.conversations import group_conversations
from obsmask_core.offline.measure.figures import (
    ConversationFigures,
    TotalFigures,
    conversation_figures,
    total_figures,
)
from obsmask_core.offline.measure.inputs import InputSummary, read_inputs
from obsmask_core.offline.proxy_bill import proxy_bill_lines
from obsmask_core.offline.proxy_settings import ProxySettings

# The encoding load_encoder loads (its offline copy first).
TOKEN_ENCODING = "cl100k_base"


@dataclass(frozen=True)
class Measurement:
    settings: ProxySettings
    inputs: list[InputSummary]
    conversations: list[ConversationFigures]
    total: TotalFigures
    # The end-of-run summary's bill lines, had the proxy seen these flows
    # (``offline.proxy_bill``).
    proxy_bill: tuple[str, ...] = ()


def measure(paths: Sequence[Path], settings: ProxySettings) -> Measurement:
    requests, inputs = read_inputs(paths, settings.routes)
    tokens = MessageTokens(load_encoder())
    figures = [
        conversation_figures(conversation,
                             bill_conversation(conversation.session, settings.policy, tokens))
        for conversation in group_conversations(requests)
    ]
    return Measurement(settings, inputs, figures, total_figures(figures),
                       proxy_bill_lines(paths, settings.routes, settings.policy))
