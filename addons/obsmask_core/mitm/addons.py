"""The nine addons of obsmask, in the order mitmproxy must run them.

``addons/obsmask.py`` (the script ``mitmdump -s`` loads) and the ``obsmask``
command (``cli/main.py``, which loads that script) both take them from here.
"""

from __future__ import annotations

from obsmask_core.mitm.add_log_event import AddLogEventFilter
from obsmask_core.mitm.brake_addon import ProviderBrake
from obsmask_core.mitm.contentview import MaskingView
from obsmask_core.mitm.conversation_addon import ConversationMasking
from obsmask_core.mitm.gateway_addon import McpGateway
from obsmask_core.mitm.mcp_addon import McpTruncation
from obsmask_core.mitm.recall_addon import Recall
from obsmask_core.mitm.settings_addon import SettingsFile
from obsmask_core.mitm.totals_addon import RunTotals
from obsmask_core.shared.tokens import TokenCounter


def obsmask_addons() -> list[object]:
    """Fresh addons: the settings file first (every other addon reads it in
    its configure), recall next (its route is answered before any other
    addon looks at the flow, and both features ask it whether recall is
    on), the provider's brake after the conversation addon (it weighs the
    usage that addon records), the totals after the features (a flow's
    facts are complete once their hooks have run), the content view (it hooks no flow), the
    filter that keeps obsmask's log records from mitmproxy's deprecated
    ``add_log`` event while no addon listens to it, and one
    tiktoken encoding in memory and one worker thread for big bodies
    (the conversation addon's) for both features."""
    settings = SettingsFile()
    tokens = TokenCounter()
    recall = Recall(settings)
    masking = ConversationMasking(settings, tokens, recall)
    return [
        settings,
        recall,
        masking,
        ProviderBrake(masking),
        McpGateway(settings),
        McpTruncation(settings, tokens, recall, masking.off_loop),
        RunTotals(settings),
        MaskingView(),
        AddLogEventFilter(),
    ]
