"""The kept requests a body may have grown from, found without comparing
the body with every one of them.

Kept requests are grouped by their first bytes (``start_keys_of``). Many
conversations may share those: every Claude Code conversation begins with
the same tools, some 50 kB of them. Within a group, each kept request is
filed under the bytes it holds at the group's ``split`` offset, where two of
its conversations were found to differ; a body that grew from a kept request
holds that request's bytes there too (it begins with them up to where its
list closed), so only the requests filed under the body's own bytes at that
offset, and the few whose list closed before it, are compared with the body.

Filing is a guess about where conversations differ, never a reason to miss
a request the body grew from, with one exception that costs only speed: a
client that moves its breakpoint (``unmarked_request``) may have had it
inside the bytes a request is filed under; the body is then read in full,
as any body that grew from nothing kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from obsmask_core.conversation.reuse.records import PreviousRequest, StartKey, start_keys_of

# How many bytes a request is filed under.
WINDOW_BYTES = 64


# The bytes ``common_prefix`` compares at a time before it looks closer.
PREFIX_CHUNK_BYTES = 64 * 1024


def common_prefix(first: bytes, second: bytes, chunk: int = PREFIX_CHUNK_BYTES) -> int:
    """How many first bytes ``first`` and ``second`` share: compared a chunk
    at a time while they agree, then a binary search within the chunk where
    they differ (memory comparisons, no copies). Bodies of megabytes may
    share most of them: the work grows with what they share, once."""
    limit = min(len(first), len(second))
    view = memoryview(second)
    at = 0
    while at < limit and first.startswith(view[at:min(limit, at + chunk)], at):
        at += chunk
    if at >= limit:
        return limit
    # The chunk from ``at`` differs: the answer lies within it.
    low, high = at, min(limit, at + chunk) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if first.startswith(view[at:middle], at):
            low = middle
        else:
            high = middle - 1
    return low


@dataclass
class _Group:
    """The kept requests of one start key, filed by their bytes at
    ``split`` (None until two conversations were found to differ)."""

    requests: dict[int, PreviousRequest] = field(default_factory=dict)
    split: int | None = None
    filed: dict[bytes, set[int]] = field(default_factory=dict)
    # The requests whose list closes before the window at ``split`` ends.
    short: set[int] = field(default_factory=set)

    def window(self, request: PreviousRequest) -> bytes | None:
        split = self.split
        if split is None or split + WINDOW_BYTES > request.end:
            return None
        return request.body[split:split + WINDOW_BYTES]

    def file(self, key: int, request: PreviousRequest) -> None:
        window = self.window(request)
        if window is None:
            self.short.add(key)
        else:
            self.filed.setdefault(window, set()).add(key)

    def unfile(self, key: int, request: PreviousRequest) -> None:
        window = self.window(request)
        if window is None:
            self.short.discard(key)
            return
        same = self.filed.get(window)
        if same is not None:
            same.discard(key)
            if not same:
                del self.filed[window]

    def split_at(self, split: int) -> None:
        """File every request again under its bytes at ``split``."""
        self.split, self.filed, self.short = split, {}, set()
        for key, request in self.requests.items():
            self.file(key, request)

    def neighbours(self, request: PreviousRequest) -> set[int]:
        """The requests filed where ``request`` is (all, before a split)."""
        if self.split is None:
            return set(self.requests)
        window = self.window(request)
        return self.short if window is None else self.filed.get(window, set())


class StartIndex:
    """The kept requests by start key, each group filed by its bytes where
    its conversations differ. Not thread-safe: ``PreviousRequests`` holds
    its lock around every call."""

    def __init__(self) -> None:
        self._groups: dict[StartKey, _Group] = {}

    def add(self, key: int, request: PreviousRequest, grown: bool) -> None:
        """File ``request`` (kept under ``key``). Unless it ``grown`` from a
        kept request (then it holds that one's bytes where it was filed), a
        request filed with others of its group may be another conversation
        that shares more than the split: the group splits where the two
        differ, if that is earlier."""
        group = self._groups.setdefault(request.start_key, _Group())
        if not grown:
            others = group.neighbours(request) - {key}
            if others:
                other = group.requests[next(iter(others))]
                split = common_prefix(request.body, other.body)
                if group.split is None or split < group.split:
                    group.requests[key] = request
                    group.split_at(split)
                    return
        group.requests[key] = request
        group.file(key, request)

    def discard(self, key: int, request: PreviousRequest) -> None:
        group = self._groups.get(request.start_key)
        if group is None or group.requests.pop(key, None) is None:
            return
        group.unfile(key, request)
        if not group.requests:
            del self._groups[request.start_key]

    def candidates(self, body: bytes, fmt: str, recall: bool) -> list[int]:
        """The keys of the kept requests ``body`` may have grown from (or
        be a retry of): in every group of its start keys, those filed
        under its bytes at the group's split, and those that close before."""
        found: list[int] = []
        for start in start_keys_of(body, fmt, recall):
            group = self._groups.get(start)
            if group is None:
                continue
            split = group.split
            if split is None:
                found.extend(group.requests)
                continue
            found.extend(group.short)
            found.extend(group.filed.get(body[split:split + WINDOW_BYTES], ()))
        return found

    def clear(self) -> None:
        self._groups.clear()
