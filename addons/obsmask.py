"""obsmask: cut the token bill of LLM agents without breaking them.

Load with ``mitmdump -s addons/obsmask.py`` (or mitmweb). Settings come from
``mitm.toml`` in the current directory and from ``--set obsmask_...`` options;
see the README.
"""

from obsmask_core.conversation_addon import ConversationMasking

addons = [ConversationMasking()]
