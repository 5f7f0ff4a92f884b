"""What the fast path keeps of a request, and what it finds a body grew
from: the records ``previous_requests`` stores and hands back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from obsmask_core.conversation.billing.breakpoints import CacheLayout
from obsmask_core.conversation.billing.cache_lifetime import Lifetime
from obsmask_core.conversation.billing.history_key import HistoryDigest
from obsmask_core.conversation.billing.last_seen import Sighting, TableVisit
from obsmask_core.conversation.billing.request_price import RequestPrice
from obsmask_core.conversation.body.closing_mark import closing_mark
from obsmask_core.conversation.planning.holdout import ConversationName
from obsmask_core.conversation.planning.judgements import Judgement
from obsmask_core.conversation.planning.plan import MaskPlan
from obsmask_core.conversation.reuse.proven_spans import ProvenSpans
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.tool_turns import IndexedItems
from obsmask_core.conversation.turns.turn_model import Location
from obsmask_core.shared.json_text import Span

# A body is compared with a kept request first by the bytes just before
# where the kept list closes (where the conversations of one agent, which
# share a long start, differ), then in full.
FINGERPRINT_BYTES = 64
# What a kept request weighs besides its bytes.
REQUEST_BYTES = 1000
# What a kept plan's entry (a result's reason kept, its judgement) weighs:
# a tuple or a dict slot and the small objects it holds.
PLAN_ENTRY_BYTES = 150
# A body is looked for only among the kept requests that begin with its
# first bytes (and the few whose list closes before that many bytes): with
# many conversations going on, looking at every kept request cost more than
# reading a 100 KB body.
START_BYTES = 256

# The requests a body may have grown from: same format, recall on or off,
# and the same first START_BYTES bytes (None: a list that closes before).
StartKey = tuple[str, bool, bytes | None]

@dataclass(frozen=True)
class Kept:
    """What a request's other members gave, which a body grown from it
    shares (its other members are the same bytes): its prices and its
    cache's lifetime, under the policy they were read under (``priced_by``),
    and the digest of its history (``history_key``; None when the table was
    not visited). ``lifetime`` is kept under OpenAI's rule only (None
    otherwise), where the other members alone decide it."""

    price: RequestPrice | None = None
    priced_by: MaskPolicy | None = None
    history: HistoryDigest | None = None
    lifetime: Lifetime | None = None


@dataclass(frozen=True)
class KeptAnswer:
    """What masking answered for a request, and what the answer came from
    besides the request's bytes: the policy, whether a table of when
    conversations were last seen was given (``with_table``), how the
    request visited it (None: it did not) and what planning took from that
    (``sighting``). Planning is a function of these and the bytes alone, so
    the same bytes again (a retry) with the same get the same answer
    without a plan made again. ``masked``: the body that went out (None:
    the client's, ``unchanged`` saying why); ``tool_chars``: the
    characters of the tool results before and after."""

    policy: MaskPolicy
    with_table: bool
    visit: TableVisit | None
    sighting: Sighting
    plan: MaskPlan
    masked: bytes | None
    unchanged: str
    tool_chars: tuple[int, int]

    @cached_property
    def weight(self) -> int:
        """The bytes the plan holds besides the bodies: the rewritten
        results' texts, before and after (the original twice when its value
        is a list of blocks, which holds the text again), and
        ``PLAN_ENTRY_BYTES`` for each reason kept and each judgement."""
        plan = self.plan
        texts = sum(len(d.original) * (1 if isinstance(d.original_value, str) else 2)
                    + len(d.new_text) for d in plan.decisions)
        return texts + PLAN_ENTRY_BYTES * (len(plan.kept_at) + len(plan.judgements))


# (place, new text, kind) of each replacement of a plan, in order.
SignatureEntry = tuple[Location, str, str]
Signature = tuple[SignatureEntry, ...]
# An edit as a masked body holds it: its entry in the plan's signature, the
# span of the body it was written over (empty for an added member) and the
# bytes written there. A masked body's are kept in the order of their spans.
PlacedEdit = tuple[SignatureEntry, Span, bytes]


@dataclass(frozen=True, slots=True)
class MaskedEnd:
    """Where a masked body's list closes (proven by its check or its
    construction), the plan's signature, and the edits it was made with
    when their spans were proven (``PreviousRequest.placed``)."""

    end: int
    signature: Signature
    placed: tuple[PlacedEdit, ...] | None = None


@dataclass(frozen=True)
class PreviousRequest:
    """A request as it went out, and where its list closes.

    ``end`` is the position of the ``]`` that closes the list in ``body``
    (a guess until a later request's read proves it; ``end_proven`` when
    its own read, or the check of its masked body, did). ``masked`` is the
    body that went out when masking changed it, with ``masked_end`` where
    its list closes (proven by its check); None when the body went out
    unchanged. ``written`` is orjson's writing of the list's items without
    the closing bracket (the bytes the frontier's checkpoint of the request
    holds, not a copy), ``items`` their number.
    ``conversation`` is the conversation's name and holdout bucket when a
    user message among the items gave them (``holdout``): every request
    that begins with them has the same."""

    fmt: str
    recall: bool
    body: bytes
    end: int
    items: int
    written: bytes
    signature: Signature
    masked: bytes | None = None
    masked_end: int = 0
    # How many requests of the conversation came one after the other, this
    # one the last (1: not grown from a kept request).
    in_a_row: int = 1
    end_proven: bool = False
    conversation: ConversationName | None = None
    # Which run of the conversation (``holdout.session_id``; None: no
    # answer of the model among its items yet).
    session: str | None = None
    # Its breakpoints (an Anthropic request's, when read): the next
    # request's are these and its added items' (``grown_layout``).
    layout: CacheLayout | None = None
    # The values whose span in ``body`` a parse proved (``proven_spans``).
    proven: ProvenSpans = field(default_factory=dict)
    kept: Kept = Kept()
    # What masking answered for it (None: not kept, as with recall).
    answer: KeptAnswer | None = None
    # The edits its masked body was made with, when its spans were proven
    # (``masked_again``; None: not known, the masked body was checked).
    placed: tuple[PlacedEdit, ...] | None = None

    @property
    def tail(self) -> bytes:
        return self.body[self.end:]

    @cached_property
    def start_key(self) -> StartKey:
        """The kept requests a body may have grown from are the ones of its
        own start key (``start_keys_of``): it begins with their bytes up to
        where their list closes."""
        start = self.body[:START_BYTES] if self.end >= START_BYTES else None
        return self.fmt, self.recall, start

    @cached_property
    def unmarked_probe(self) -> tuple[Span, int, bytes] | None:
        """Where the ``cache_control`` member that ends the latest item is
        (``closing_mark``; None: it has none there), and the bytes just
        before it and where they begin: a next request of another
        conversation with the same start (Claude Code's tools) differs
        there. Found once, not for every request of every such
        conversation (``unmarked_request``)."""
        span = closing_mark(self.body, self.end)
        if span is None:
            return None
        before = max(0, span[0] - FINGERPRINT_BYTES)
        return span, before, self.body[before:span[0]]

    @cached_property
    def fingerprint(self) -> bytes:
        """The bytes just before where the list closes (see ``grown_from``)."""
        return self.body[max(0, self.end - FINGERPRINT_BYTES):self.end]

    @cached_property
    def weight(self) -> int:
        # ``written`` is the checkpoint's, weighed with the checkpoints while
        # they keep it; once they let it go, this keeps it alive (no more
        # bytes than the body it was written from).
        answer = self.answer
        return (len(self.body) + REQUEST_BYTES
                + (len(self.masked) if self.masked is not None else 0)
                + (PLAN_ENTRY_BYTES * len(self.placed) if self.placed is not None else 0)
                + (answer.weight if answer is not None else 0)
                + (len(answer.masked) if answer is not None and answer.masked is not None
                   and answer.masked is not self.masked else 0))


def start_keys_of(body: bytes, fmt: str, recall: bool) -> tuple[StartKey, StartKey]:
    """The start keys of the kept requests ``body`` may have grown from."""
    return (fmt, recall, body[:START_BYTES]), (fmt, recall, None)


# A parsed body: its top-level members, the list among them.
Document = dict[str, object]


@dataclass(frozen=True)
class Grown:
    """A body that begins with a previous request's bytes up to where its
    list closes, and ends with the rest of them: what lies between
    (``added``, from ``start`` to ``end``) should be new items.
    ``document`` is the previous request's body as orjson read it, when
    its read proved where its list closes and it is still kept, and
    ``indexed`` the index of its items when that is kept, with its results'
    judgements (``judgements``: by number, None for one not judged)."""

    previous: PreviousRequest
    start: int
    end: int
    document: Document | None = None
    indexed: IndexedItems | None = None
    judgements: Sequence[Judgement | None] = ()
    # The request as kept, when ``previous`` is its view without the
    # breakpoint its client moved on (``unmarked_request``).
    kept: PreviousRequest | None = None

    def added(self, body: bytes) -> bytes:
        return body[self.start:self.end]

    @property
    def record(self) -> PreviousRequest:
        """The request as kept (the one the next one replaces)."""
        return self.kept if self.kept is not None else self.previous


@dataclass(frozen=True)
class KeptIndex:
    """A kept request's index, and its results' judgements."""

    indexed: IndexedItems
    judgements: Sequence[Judgement | None]


@dataclass(frozen=True)
class KeptDocument:
    """A kept request's document, and what it weighs."""

    document: Document
    weight: int
