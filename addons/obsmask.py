"""obsmask: cut the token bill of LLM agents without breaking them.

Load with ``mitmdump -s addons/obsmask.py`` (or mitmweb). Settings come from
``mitm.toml`` in the current directory and from ``--set obsmask_...`` and
``--set mcpmask_...`` options; see the README.
"""

from obsmask_core.conversation_addon import ConversationMasking
from obsmask_core.mcp_addon import McpTruncation
from obsmask_core.tokens import TokenCounter

# One tiktoken encoding in memory for both.
_tokens = TokenCounter()
addons = [ConversationMasking(_tokens), McpTruncation(_tokens)]
