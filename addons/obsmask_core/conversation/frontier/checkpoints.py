"""The frontier's checkpoints, kept between the requests of a conversation.

An agent sends its whole history again with every request, and the
frontier replays that history request by request (``frontier``): without a
checkpoint, every request replays every earlier one again, and measures
every item again. With the last request's checkpoint, a request replays only
what was added since. A checkpoint is used only when the request's items
begin with the checkpoint's, byte for byte as orjson writes them (the
client's moving breakpoints left out: ``items_json``), and the
replay agrees to resume from it (``Frontier._may_resume``): so the plan is
the one a full replay makes, only sooner. Nothing is kept but figures and
those bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from obsmask_core.conversation.billing.unmarked import unmarked_json
from obsmask_core.conversation.frontier.replay_checkpoint import Checkpoint

# Conversations are told apart by their first items (``conversation_id``);
# several may share those (sub-agents given the same task): a few
# checkpoints per name, the longest that fits is used.
CHECKPOINTS_PER_CONVERSATION = 4
# What every checkpoint weighs together (``_weight``: their items' bytes,
# mostly), per policy; the oldest conversation goes first. Sized with the
# kept requests (``previous_requests``), whose written items are these.
CHECKPOINT_BYTES_KEPT = 128 * 1024 * 1024


def items_json(items: Sequence[object]) -> bytes | None:
    """orjson's writing of the items, their ``cache_control`` members left
    out (``unmarked``: the client moves them, the replay does not read them),
    or None if it cannot write them (an integer past 64 bits): such a
    request is replayed in full."""
    return unmarked_json(items if isinstance(items, list) else list(items))


# What a checkpoint weighs besides its bytes: the objects around them, and
# per item (a count of characters, a flag...) an int and its slot.
_CHECKPOINT_BYTES = 800
_BYTES_PER_ITEM = 48


def _weight(checkpoint: Checkpoint) -> int:
    """Roughly the memory a checkpoint holds: a conversation of many short
    requests (title generation, say) weighs more than its items' bytes."""
    return (len(checkpoint.items_json) + _CHECKPOINT_BYTES
            + _BYTES_PER_ITEM * (len(checkpoint.chars_before) + len(checkpoint.masked_turns)
                                 + len(checkpoint.closing_blocks)
                                 + 3 * len(checkpoint.freed)))


class Checkpoints:
    """The latest checkpoints of the conversations, for one policy. Shared
    by the event loop and the worker thread, hence the lock."""

    def __init__(self, bytes_kept: int = CHECKPOINT_BYTES_KEPT) -> None:
        self._bytes_kept = bytes_kept
        self._bytes = 0
        self._kept: OrderedDict[str, list[Checkpoint]] = OrderedDict()
        self._lock = threading.Lock()

    def find(self, conversation: str, written: bytes) -> Checkpoint | None:
        """The longest checkpoint of ``conversation`` whose items the
        request's (``written``) begin with."""
        with self._lock:
            kept = self._kept.get(conversation, [])
            candidates = sorted(kept, key=lambda c: c.items, reverse=True)
        for checkpoint in candidates:
            if checkpoint.same_items(written):
                return checkpoint
        return None

    def keep(self, conversation: str, checkpoint: Checkpoint) -> None:
        """Keep ``checkpoint``; it replaces the one it grew from (or an
        equal one), and the oldest go when there are too many."""
        size = _weight(checkpoint)
        if size > self._bytes_kept:
            return
        with self._lock:
            kept = self._kept.pop(conversation, [])
            # The one it grew from is a prefix of it: no later request
            # needs that one rather than this.
            for old in [c for c in kept if c.items <= checkpoint.items
                        and checkpoint.items_json.startswith(c.items_json)]:
                kept.remove(old)
                self._bytes -= _weight(old)
            kept.append(checkpoint)
            self._bytes += size
            while len(kept) > CHECKPOINTS_PER_CONVERSATION:
                self._bytes -= _weight(kept.pop(0))
            self._kept[conversation] = kept
            while self._bytes > self._bytes_kept and self._kept:
                _, dropped = self._kept.popitem(last=False)
                self._bytes -= sum(_weight(c) for c in dropped)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0
