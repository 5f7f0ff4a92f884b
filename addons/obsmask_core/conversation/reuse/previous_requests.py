"""The latest request of each conversation, kept so the next one costs less
(``hint`` says how the next one uses it, and why that is right).

What is kept is bounded three ways: the requests themselves (their bodies
and masked bodies), the index of their items, and, while few agents are at
work, their documents (each body as orjson read it). The bounds trade
memory and the garbage collector's walks against the work a request
spares; the figures that chose them are on the benchmarks page.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from obsmask_core.conversation.body.closing_mark import without_closing_mark
from obsmask_core.conversation.planning.judgements import Judgement
from obsmask_core.conversation.reuse.records import (
    Document,
    Grown,
    KeptDocument,
    KeptIndex,
    PreviousRequest,
)
from obsmask_core.conversation.reuse.start_index import StartIndex
from obsmask_core.conversation.reuse.unmarked_request import unmarked_request
from obsmask_core.conversation.turns.tool_turns import IndexedItems

# The latest requests of every conversation, as many as fit in these bytes
# (their bodies and masked bodies); the least recently used go first. Sized
# so that the load benchmark's fifty agents, some with long histories, do
# not push each other out before their next request.
REQUESTS_KEPT = 256
PREVIOUS_BYTES_KEPT = 256 * 1024 * 1024
# And the documents of some of them (each body as orjson read it, for
# reading the next body from it and its added items alone), counted at
# DOCUMENT_WEIGHT_PERCENT of the body's bytes (what tracemalloc measured on
# the real sessions), while few conversations are going on: at most
# DOCUMENT_CONVERSATIONS used in the last DOCUMENT_IDLE_SECONDS, and in
# these bytes. A document's objects live from one request to the next, and
# every full collection of the garbage collector walks them, holding the
# GIL: with many agents the collections cost more than the reads spare,
# with a few a request costs less.
DOCUMENT_CONVERSATIONS = 8
# And only from a conversation's third request in a row on: one that stops
# after a request or two (a title, a one-off question, a benchmark's pair)
# would leave a document whose objects only add to the collector's walks.
DOCUMENT_AFTER_REQUESTS = 3
DOCUMENT_IDLE_SECONDS = 120.0
DOCUMENT_BYTES_KEPT = 32 * 1024 * 1024
DOCUMENT_WEIGHT_PERCENT = 170
# And the index of their items (the next request's index is made from it
# and its added items alone), for as many results as these allow. An index
# is lighter than a document, but its turns and results are named tuples,
# which the collector walks for as long as they live (it stops walking only
# plain tuples of plain values): many big indexes make one collection long
# enough to stall a stream. So no index of more than
# INDEX_RESULTS_PER_REQUEST results is kept (a long agent history holds a
# few hundred), and at most INDEX_RESULTS_KEPT in all, holding at most
# INDEX_CHARS_KEPT characters of the results' texts (its own copies), least
# recently used out first.
INDEX_RESULTS_PER_REQUEST = 2_500
INDEX_RESULTS_KEPT = 100_000
INDEX_CHARS_KEPT = 128 * 1024 * 1024
class PreviousRequests:
    """The latest request of each conversation, for one policy. Shared by
    the event loop and the worker thread, hence the lock."""

    def __init__(self, bytes_kept: int = PREVIOUS_BYTES_KEPT,
                 requests_kept: int = REQUESTS_KEPT,
                 document_bytes_kept: int = DOCUMENT_BYTES_KEPT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._bytes_kept = bytes_kept
        self._requests_kept = requests_kept
        self._document_bytes_kept = document_bytes_kept
        self._bytes = 0
        self._kept: OrderedDict[int, PreviousRequest] = OrderedDict()
        # The documents of kept requests (by the same key), least recently
        # used first, with their weight; a request's goes when it goes.
        self._documents: OrderedDict[int, KeptDocument] = OrderedDict()
        # When each kept request was kept or last grown from (its place in
        # ``_kept`` is the order of these).
        self._used: dict[int, float] = {}
        # The kept requests by start key (``start_index``), and the order in
        # which they were kept or last grown from (the order of ``_kept``).
        self._starts = StartIndex()
        self._recency: dict[int, int] = {}
        self._uses = itertools.count()
        self._document_bytes = 0
        # The indexes of kept requests (by the same key), least recently
        # used first, and how many results and characters they hold.
        self._indexes: OrderedDict[int, KeptIndex] = OrderedDict()
        self._index_results = 0
        self._index_chars = 0
        self._lock = threading.Lock()

    def grown_from(self, body: bytes, fmt: str, recall: bool,
                   list_member: str = "messages") -> Grown | None:
        """The kept request ``body`` grew from: one with the same bytes if
        there is one (a retry), else the most recent it grew from; else the
        most recent it grew from once that request's moving breakpoint is
        taken out (``unmarked_request``: a client that moves its
        breakpoint on every request, as Claude Code does). ``list_member``:
        the body's list."""
        with self._lock:
            keys = self._starts.candidates(body, fmt, recall)
            keys.sort(key=self._recency.__getitem__, reverse=True)
            candidates = [self._kept[key] for key in keys]
        candidates = [c for c in candidates if c.fmt == fmt and c.recall == recall]
        found = _grown(body, candidates)
        kept: PreviousRequest | None = None
        if found is None:
            for candidate in candidates:
                # The bytes before its breakpoint are checked: not again.
                if (unmarked := unmarked_request(candidate, body)) is not None \
                        and (found := _grown(body, [unmarked[0]], unmarked[1])) is not None:
                    kept = candidate
                    break
        if found is None:
            return None
        record = kept if kept is not None else found.previous
        key = id(record)
        with self._lock:
            if key not in self._kept:
                return Grown(found.previous, found.start, found.end, kept=kept)
            self._kept.move_to_end(key)
            self._used[key] = self._clock()
            self._recency[key] = next(self._uses)
            kept_index = self._indexes.get(key)
            if kept_index is not None:
                self._indexes.move_to_end(key)
            kept_document = self._documents.get(key)
            if kept_document is not None:
                self._documents.move_to_end(key)
        document = kept_document.document if kept_document is not None else None
        if document is not None and kept is not None:
            document = _unmarked_document(document, list_member)
        if kept_index is None:
            return Grown(found.previous, found.start, found.end, document, kept=kept)
        return Grown(found.previous, found.start, found.end, document, kept_index.indexed,
                     kept_index.judgements, kept=kept)

    def keep(self, request: PreviousRequest, replaces: PreviousRequest | None = None,
             document: Document | None = None, indexed: IndexedItems | None = None,
             judgements: Sequence[Judgement | None] = (),
             read_document: Callable[[], Document | None] | None = None) -> None:
        """Keep ``request``, in place of ``replaces`` (the request it grew
        from: no later request needs that one rather than this), with its
        body as orjson read it (``document``, when the read proved where its
        list closes; else ``read_document`` reads it whole, only when it
        would be kept), its items' index (``indexed``) and judgements."""
        size, document_weight = request.weight, len(request.body) * DOCUMENT_WEIGHT_PERCENT // 100
        with self._lock:
            if replaces is not None and self._kept.pop(id(replaces), None) is not None:
                self._bytes -= replaces.weight
                self._forget(id(replaces), replaces)
            wanted = document is None and read_document is not None \
                and request.in_a_row >= DOCUMENT_AFTER_REQUESTS and size <= self._bytes_kept \
                and self._document_fits(document_weight, self._conversations_going_on() + 1)
        if wanted and read_document is not None:
            document = read_document()
        with self._lock:
            if size > self._bytes_kept:
                return
            self._kept[id(request)] = request
            self._used[id(request)] = self._clock()
            self._recency[id(request)] = next(self._uses)
            self._starts.add(id(request), request, grown=replaces is not None)
            self._bytes += size
            while self._bytes > self._bytes_kept or len(self._kept) > self._requests_kept:
                key, dropped = self._kept.popitem(last=False)
                self._bytes -= dropped.weight
                self._forget(key, dropped)
            # Kept only with its request (a document under a key no longer
            # kept could come back as another request's).
            if indexed is not None and id(request) in self._kept:
                self._keep_index(id(request), KeptIndex(indexed, judgements))
            if document is not None and id(request) in self._kept \
                    and request.in_a_row >= DOCUMENT_AFTER_REQUESTS:
                self._keep_document(id(request), KeptDocument(document, document_weight))

    def _keep_document(self, key: int, kept: KeptDocument) -> None:
        """Keep the document of the request kept under ``key`` if it fits (lock held)."""
        weight, conversations = kept.weight, self._conversations_going_on()
        if conversations > DOCUMENT_CONVERSATIONS:
            # Many agents at work: the documents still kept go too.
            self._documents.clear()
            self._document_bytes = 0
            return
        if not self._document_fits(weight, conversations):
            return
        # Room made from the documents of conversations gone idle (ended).
        while self._document_bytes + weight > self._document_bytes_kept:
            self._document_bytes -= self._documents.pop(next(iter(self._documents))).weight
        self._documents[key] = kept
        self._document_bytes += weight

    def _document_fits(self, weight: int, conversations: int) -> bool:
        """Would a document of ``weight`` bytes be kept now (lock held): few
        ``conversations`` going on, and room once those gone idle drop theirs."""
        if conversations > DOCUMENT_CONVERSATIONS:
            return False
        since, room, used = (self._clock() - DOCUMENT_IDLE_SECONDS, self._document_bytes_kept,
                             self._document_bytes)
        for key, kept in self._documents.items():
            if used + weight <= room or self._used.get(key, since) > since:
                break
            used -= kept.weight
        return used + weight <= room

    def _keep_index(self, key: int, kept: KeptIndex) -> None:
        """Keep the index of the request kept under ``key`` (lock held),
        making room from the least recently used."""
        results, chars = len(kept.indexed.index.results), kept.indexed.text_chars
        if results > INDEX_RESULTS_PER_REQUEST or chars > INDEX_CHARS_KEPT:
            return
        while (self._index_results + results > INDEX_RESULTS_KEPT
               or self._index_chars + chars > INDEX_CHARS_KEPT) and self._indexes:
            self._forget_index(self._indexes.popitem(last=False)[1])
        self._indexes[key] = kept
        self._index_results += results
        self._index_chars += chars

    def _forget_index(self, dropped: KeptIndex) -> None:
        self._index_results -= len(dropped.indexed.index.results)
        self._index_chars -= dropped.indexed.text_chars

    def _conversations_going_on(self) -> int:
        """How many kept requests were used lately, up to one more than
        DOCUMENT_CONVERSATIONS (lock held): the latest used come last."""
        since = self._clock() - DOCUMENT_IDLE_SECONDS
        count = 0
        for key in reversed(self._kept):
            if self._used[key] < since or count > DOCUMENT_CONVERSATIONS:
                break
            count += 1
        return count

    def _forget(self, key: int, request: PreviousRequest) -> None:
        """What goes with a request no longer kept (lock held): its key
        may be a later request's."""
        self._used.pop(key, None)
        self._recency.pop(key, None)
        self._starts.discard(key, request)
        kept_document = self._documents.pop(key, None)
        if kept_document is not None:
            self._document_bytes -= kept_document.weight
        kept_index = self._indexes.pop(key, None)
        if kept_index is not None:
            self._forget_index(kept_index)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0
            self._documents.clear()
            self._document_bytes = 0
            self._indexes.clear()
            self._index_results = 0
            self._index_chars = 0
            self._used.clear()
            self._starts.clear()
            self._recency.clear()


def _grown(body: bytes, candidates: Sequence[PreviousRequest], same_to: int = 0) -> Grown | None:
    """The first of ``candidates`` (latest first) that ``body`` is, or grew
    from; one with the same bytes (a retry) before any other. ``same_to``:
    the body's first bytes, as many, are known to be the candidates'."""
    found: Grown | None = None
    size = len(body)
    # Every candidate is looked at, the latest first (a retry's may be
    # older than the one the body grew from): the cheap tests first.
    for previous in candidates:
        end = previous.end
        tail_at = size - (len(previous.body) - end)
        if tail_at < end:
            continue
        if tail_at == end:
            if body != previous.body:
                continue
            return Grown(previous, end, tail_at)
        fingerprint = previous.fingerprint
        if found is None and body.startswith(fingerprint, end - len(fingerprint)) \
                and body.endswith(previous.tail) \
                and body.startswith(memoryview(previous.body)[same_to:end], same_to):
            found = Grown(previous, end, tail_at)
    return found


def _unmarked_document(document: Document, list_member: str) -> Document | None:
    """A kept document as its ``unmarked_request`` reads: its list's latest
    item without the breakpoint that ends it (a copy along the way)."""
    items = document.get(list_member)
    unmarked = without_closing_mark(items)
    return None if unmarked is None else {**document, list_member: unmarked}
