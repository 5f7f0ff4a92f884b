"""The masking policy: every setting of conversation masking, declared once,
and the placeholder a masked result becomes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from obsmask_core.conversation.billing.model_table import (
    ModelTable,
    parse_setting_row,
    shipped_rows,
)
from obsmask_core.conversation.billing.price_models import PRICE_MODEL_NAMES
from obsmask_core.conversation.settings.placeholder_matcher import (
    PLACEHOLDER_FIELDS,
    UNKNOWN_TOOL_NAME,
    PlaceholderMatcher,
)
from obsmask_core.shared.config_file import ConfigFile
from obsmask_core.shared.errors import ConfigError, SettingError
from obsmask_core.shared.recall_text import hint
from obsmask_core.shared.settings import check_fields, setting
from obsmask_core.shared.templates import FieldTemplate

# Short, with the id, the tool and the size; French, as the specification
# obsmask follows wrote it (clients compare it byte for byte across requests).
# {recall} is empty unless recall is on, so the bytes are the specification's.
DEFAULT_PLACEHOLDER_TEMPLATE = (
    "[Observation masquée: résultat d'outil ancien "
    "(tool_call_id={tool_call_id}, outil={tool_name}, chars={original_chars}){recall}]"
)
DEFAULT_PRESERVE_PATTERNS = (("BEGIN_DISPATCH_RESULT", "END_DISPATCH_RESULT"),)
# Where the settings file keeps them.
POLICY_SECTION = ("observation_masking", "schema1")
PROFILES_SECTION = ("observation_masking", "profiles")


def render_placeholder(
    template: str, tool_call_id: str, tool_name: str | None, original_chars: int,
    *, recall: bool = False,
) -> str:
    """The placeholder of one result; with ``recall``, ``{recall}`` says how
    to get it back (its id is the call's id: the client still holds it)."""
    return template.format(
        tool_call_id=tool_call_id,
        tool_name=tool_name if tool_name is not None else UNKNOWN_TOOL_NAME,
        original_chars=original_chars,
        recall=hint(tool_call_id if recall else None),
        recall_id=tool_call_id if recall else "",
    )


def check_placeholder_template(key: str, value: object) -> None:
    """Raise SettingError unless the template uses only the known fields and renders."""
    if not isinstance(value, str):
        return
    FieldTemplate(key, value, PLACEHOLDER_FIELDS)
    try:
        render_placeholder(value, "call_0", "tool", 12345, recall=True)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise SettingError(key, f"does not render ({e})") from e


def check_price_model(key: str, value: object) -> None:
    if isinstance(value, str) and value not in PRICE_MODEL_NAMES:
        raise SettingError(key, f"must be one of {', '.join(PRICE_MODEL_NAMES)}, "
                                f"got {value!r}")


def check_model_prices(key: str, value: object) -> None:
    """Raise SettingError unless every pair is a row (``model_table``)."""
    if isinstance(value, tuple):
        model_table_of(value)


def model_table_of(pairs: tuple[tuple[str, str], ...]) -> ModelTable:
    """The model table: the rows ``pairs`` make, then the shipped ones."""
    shipped = shipped_rows()
    return ModelTable([*(parse_setting_row(pattern, terms, shipped) for pattern, terms in pairs),
                       *shipped])


@dataclass(frozen=True, kw_only=True)
class MaskPolicy:
    """What to mask. Each field is a setting: a ``[observation_masking.schema1]``
    key of mitm.toml and an ``obsmask_<key>`` option. The first five are the
    plain sliding window; the others make masking cache-aware and budgeted and
    are neutral at their defaults, except ``preserve_patterns``, which only
    acts on results holding such a block."""

    enabled: bool = setting(True, """
        Mask old tool results in requests on the obsmask_*_route routes. false
        forwards every body byte for byte (the instant rollback).""")
    window_turns: int = setting(8, """
        How many of the most recent tool turns keep their results intact. A
        tool turn is one model turn that called tools: an assistant message
        with tool_calls or tool_use blocks, or a run of function_call items
        (several calls in one turn are one turn). Results of older turns are
        replaced by the placeholder. 0 masks nothing.""", minimum=0)
    keep_errors: bool = setting(True, """
        Never mask a result that reads as an error: a Python traceback, a line
        starting with an exception name or "error:", a compiler error, a
        timeout or refused connection, JSON with a non-empty "error" or
        "status": "error", or a command that the agent reports ended with an
        exit code other than 0 ("Exit code: 1", "Process exited with code 1",
        <returncode>1</returncode>, "[Command finished with exit code 1]",
        JSON "returncode": 1...).""")
    keep_last_k_per_tool: int = setting(0, """
        Keep the K most recent results of each tool intact even outside the
        window (0: off).""", minimum=0)
    placeholder_template: str = setting(DEFAULT_PLACEHOLDER_TEMPLATE, """
        Text that replaces a masked result. Fields: {tool_call_id}, {tool_name}
        ("inconnu" when unknown), {original_chars}, {recall} ("; recall
        id=ID" when recall is on, else empty) and {recall_id}; format specs
        such as {original_chars:,} work. A result is only masked when the
        placeholder is shorter than it.""", check=check_placeholder_template)
    batch_turns: int = setting(1, """
        Move the masking frontier in steps of this many tool turns, so the
        masked part of the history stays byte-identical between moves and the
        provider's prompt cache keeps serving it. 1 is the plain sliding
        window.""", minimum=1)
    trigger_tokens: int = setting(0, """
        Mask nothing while the request's estimated input (characters / 4) is
        below this many tokens. 0: always.""", minimum=0)
    min_chars: int = setting(0, """
        Never mask a result shorter than this many characters.""", minimum=0)
    exclude_tools: tuple[str, ...] = setting((), """
        Tools whose results are never masked or clipped (repeat the option for
        several).""")
    min_free_percent: int = setting(0, """
        Move the frontier only when the results it masks free at least this
        percentage of what the move makes the provider bill again (everything
        after the first newly masked result). 0: always.""", minimum=0)
    payback_factor: int = setting(0, """
        With a price model that has a cache: move the frontier only when the
        reads of what the move frees, on every later request, pay for what
        it re-bills at the write price within this many times the requests
        the conversation has made so far (its prices, its age: a long
        conversation is likely to go on). 0: always.""", minimum=0, maximum=1000)
    price_model: str = setting("none", """
        The provider's prices, for the bill the frontier keeps. "auto": each
        request under its own model's prices and cache rule, from the model
        table (docs/models.md; model_prices adds rows), a model the table
        does not know under its provider's most cautious terms. Or one price
        for every request: "anthropic" (cache reads 0.1, writes 1.25, or 2.0
        for an hour's lifetime), "openai" (cached input 0.1), "openai_50"
        (cached input 0.5) or "none" (no cache). Each request is billed under
        its provider's cache as it runs it: Anthropic's breakpoints for
        Anthropic Messages, OpenAI's automatic prefix cache for Chat
        Completions and Responses. With a cache, the frontier moves only when
        the bill of the conversation so far, replayed from the request with
        obsmask's past decisions, stays within allowance_percent of the bill
        without masking. "none": every move is free (the plain window).""",
        check=check_price_model)
    model_prices: tuple[tuple[str, str], ...] = setting((), """
        Rows of the model table put before the shipped ones (price_model
        "auto"): pairs of a model pattern (shell-style, * for any text) and
        either a shipped row's name (["my-deployment-*", "claude-fable-5"])
        or its terms (["my-model", "cache=anthropic_breakpoints read=0.05
        write=1.25 write_1h=2 minimum=512"]; cache is anthropic_breakpoints,
        openai_prefix_steps or openai_prefix). The first row that matches a
        request's model wins.""", check=check_model_prices)
    frontier_breakpoint: bool = setting(False, """
        Anthropic Messages: once results are masked, put a cache breakpoint
        (cache_control, a copy of the client's own) on the last block of
        the assistant message of the frontier's turn, when the client marks
        the end of its request and uses fewer than four breakpoints. The
        next move then reads the history up to there from the prompt cache
        instead of writing it all again. The one change obsmask makes
        outside tool results; false leaves every other byte as the client
        sent it.""")
    allowance_percent: int = setting(0, """
        How far above the bill without masking the bill so far may go when
        the frontier moves (price_model with a cache), in percent of the bill
        without masking.""", minimum=0, maximum=100)
    cold_turns: bool = setting(False, """
        Mask for free on a cold turn (price_model with a cache): a request
        of a conversation unseen for longer than its cache lives is billed
        whole, masked or not, so the frontier catches up there and masks
        what was kept for the cache's sake. Conversations are known by
        their history, in the table of when they were last seen (memory,
        or [recall]'s shared Redis; without it, keep each conversation on
        one proxy). false: the cache is counted as warm.""")
    cold_after_seconds: int = setting(0, """
        With cold_turns, how long a conversation must be unseen for its
        request to be cold. 0: the provider's lifetime for the request and
        60 seconds for clock differences: Anthropic 300, 3600 with ttl
        "1h"; OpenAI 3600, a day with prompt_cache_retention "24h" or a
        longer prompt_cache_options ttl. Another value is taken as given,
        for a provider or gateway whose lifetime differs (too short, the
        bill may go up: provider_brake stops it). Above 0 turns cold_turns
        on.""", minimum=0)
    provider_brake: bool = setting(False, """
        Compare the cache figures the provider reports in each answer with
        the ledger's prediction (price_model with a cache); once a
        conversation's bill so far, as the provider billed it, goes past
        the bill without masking and allowance_percent, its frontier stops
        (what is masked stays masked: unmasking would re-bill too). Kept
        with the table of when conversations were last seen (in memory, or
        [recall]'s Redis server when shared): a restart lets it go until
        the figures trip it again. false: the figures are only recorded.""")
    refetch_guard: bool = setting(False, """
        When the model makes a call again (same tool, same arguments as
        JSON) after the earlier call's result was masked, with no call in
        between that may have changed what it reads (a re-fetch), keep the
        results of that call and of every later call that is the same
        intact (kept reason "refetched"), so the model does not have to
        fetch them a third time. Decided from the request alone, like the
        frontier. false: re-fetches are only counted.""")
    holdout_percent: int = setting(0, """
        Leave this share of conversations unmasked, chosen by a hash of their
        first user message (the same conversations every time), so that real bills
        can be compared between the two groups. 0: none.""", minimum=0, maximum=100)
    max_input_tokens: int = setting(0, """
        If a request is still estimated above this many tokens after masking,
        clip the results inside the window to head + marker + tail, oldest
        first. 0: off.""", minimum=0)
    clip_head_chars: int = setting(2000, """
        Characters kept from the start of a clipped result. The marker between
        head and tail is "... [OBSMASK_TRUNCATED original_chars=N head=H
        tail=T] ..."; a clipped text is never clipped again.""", minimum=0)
    clip_tail_chars: int = setting(2000, """
        Characters kept from the end of a clipped result.""", minimum=0)
    preserve_patterns: tuple[tuple[str, str], ...] = setting(DEFAULT_PRESERVE_PATTERNS, """
        BEGIN|END marker pairs ([["BEGIN", "END"]] in mitm.toml): a block from
        BEGIN to END inside a masked result survives masking, after the
        placeholder.""")
    matcher: PlaceholderMatcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_fields(self)
        object.__setattr__(self, "matcher", PlaceholderMatcher(self.placeholder_template))

    @cached_property
    def models(self) -> ModelTable:
        """The model table ``price_model = "auto"`` prices requests by."""
        return model_table_of(self.model_prices)

    @property
    def cold_turns_on(self) -> bool:
        """Are cold turns billed as cold (``cold_turns``, or a lifetime of
        its own in ``cold_after_seconds``)?"""
        return self.cold_turns or self.cold_after_seconds > 0

    @property
    def per_tool_keep(self) -> int:
        return self.keep_last_k_per_tool


def policy_values(config: ConfigFile, profile: str) -> dict[str, object]:
    """The policy keys of the settings file, overlaid with ``profile``'s
    (empty: none). Every profile is checked, chosen or not, so that a wrong
    one is found at start-up rather than on the day it is chosen."""
    values = config.settings(MaskPolicy, POLICY_SECTION)
    profiles = {
        name: config.settings(MaskPolicy, (*PROFILES_SECTION, name))
        for name in config.table(PROFILES_SECTION)
    }
    if profile:
        if profile not in profiles:
            known = ", ".join(sorted(profiles)) or "none"
            raise ConfigError(f"{config.source}: no profile {profile!r} (profiles: {known})")
        values.update(profiles[profile])
    return values
