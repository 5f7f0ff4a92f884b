"""The text report of ``measure.py``: the bill without and with obsmask
under each price model first (in total, then per conversation), the tokens
second, then the provider's own figures where the flows have them, and how
it was all estimated."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from obsmask_core.offline.cache.model import ANTHROPIC_RULE, OPENAI_RULE
from obsmask_core.offline.cache.so_far import FIRST_JUDGED_REQUEST
from obsmask_core.offline.measure.comparison import RequestComparison
from obsmask_core.offline.measure.figures import (
    REPORTED_MODELS,
    Bill,
    ConversationFigures,
    TokenFigures,
    TotalFigures,
)
from obsmask_core.offline.measure.inputs import FLOWS, InputSummary
from obsmask_core.offline.measure.run import TOKEN_ENCODING, Measurement
from obsmask_core.offline.measure.usage import cache_rule
from obsmask_core.offline.proxy_settings import ProxySettings
from obsmask_core.shared.request_record import Action

RULE_TITLES: Mapping[str, str] = MappingProxyType(
    {ANTHROPIC_RULE: "Anthropic's rule", OPENAI_RULE: "OpenAI's rule"})
OBSMASK_MARK = "*"
SENSITIVITY_NOTE = (
    "Anthropic's prices with the former reading of its cache, shown for sensitivity: a "
    "request reads the longest prefix it shares with the previous request (from 1,024 "
    "tokens), whatever its breakpoints and its time, and the rest is a cache write")
HOW = (
    "How: each conversation (the client's requests; a masked flow's original from its "
    "backup) is replayed request by request, every prefix that ends just before an answer "
    "of the model, one request every 20 seconds. Each request is sent as the client sends "
    "it (Anthropic's as Claude Code marks it: cache breakpoints on its two system blocks and "
    "its last block), masked as the proxy masks it with the settings above (masking is a "
    "pure function of the request) and billed under each price model. Anthropic's cache "
    "reads, at a breakpoint of the request or up to 20 blocks before it, the longest entry "
    "an earlier request wrote at one of its breakpoints in the last 5 minutes, and bills the "
    "tokens from there to the request's last breakpoint as a cache write; OpenAI's reads the "
    "longest prefix the request shares with an earlier one of the last hour, counted in steps "
    "of 128; neither reads under 1,024 tokens. "
    f"Tokens are counted with {TOKEN_ENCODING} per block (each tool definition, the system, "
    "each message's content blocks), 3 framing tokens a message. These are estimates, not "
    "your provider's bill."
)


def _number(value: float) -> str:
    return f"{round(value):,}"


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "n/a"


def _change(before: int, after: int) -> str:
    return f"{(after - before) / before * 100:+.1f}%" if before else "n/a"


def _input_line(summary: InputSummary) -> str:
    if summary.kind != FLOWS:
        return f"  {summary.file}: a request body"
    line = (f"  {summary.file}: {summary.http_requests} HTTP flows, "
            f"{summary.conversation_requests} conversation requests")
    if summary.masked_when_recorded:
        line += (f" ({summary.masked_when_recorded} masked by obsmask when recorded: "
                 "read from their backup, as the client sent them)")
    skipped = [f"{count} {reason}" for reason, count in summary.skipped.items()]
    return line + (f"; skipped: {'; '.join(skipped)}" if skipped else "")


def _settings_lines(settings: ProxySettings) -> list[str]:
    price_model = settings.policy.price_model
    lines = ["Settings (as the proxy would take them):", f"  {settings.line}"]
    if not settings.policy.enabled:
        lines.append("  Masking is off: the bill with obsmask is the bill without it.")
    elif price_model == "none":
        lines.append('  obsmask\'s decisions used price_model = "none": they ignore the '
                     "provider's prompt cache (the plain window).")
    else:
        lines.append(f'  obsmask\'s decisions used price_model = "{price_model}" (marked '
                     f"{OBSMASK_MARK} below): the frontier moves only when that bill allows.")
    if settings.ignored:
        lines.append(f"  Ignored (they do not change conversation masking): "
                     f"{', '.join(settings.ignored)}")
    return lines


def _used(price_model: str) -> tuple[str, ...]:
    """The reported models a setting's price model stands for: "auto" is
    Anthropic's for Anthropic requests and OpenAI's for the others."""
    return ("anthropic", "openai") if price_model == "auto" else (price_model,)


def _bill_table(bills: dict[str, Bill], obsmask_model: str,
                worst: dict[str, tuple[float, int] | None] | None = None,
                indent: str = "  ") -> list[str]:
    header = (f"{'price model':<24}{'without obsmask':>16}{'with obsmask':>15}{'ratio':>8}"
              f"{'saved':>13}" + (f"   worst bill so far (from request {FIRST_JUDGED_REQUEST})"
                                  if worst is not None else ""))
    lines = [indent + header]
    for model in REPORTED_MODELS:
        bill = bills[model.name]
        label = model.name + (f" {OBSMASK_MARK}" if model.name in _used(obsmask_model) else "")
        line = (f"{label:<24}{_number(bill.without):>16}{_number(bill.with_obsmask):>15}"
                f"{_ratio(bill.ratio):>8}{_number(bill.saved):>13}")
        if worst is not None:
            found = worst[model.name]
            line += f"   {_ratio(found[0])} at request {found[1]}" if found else "   -"
        lines.append(indent + line)
    return lines


def _dearer_line(bills: dict[str, Bill]) -> list[str]:
    """Say it in words when obsmask costs more than it saves."""
    dearer = [model.name for model in REPORTED_MODELS
              if (bills[model.name].ratio or 0.0) > 1.0]
    if not dearer:
        return []
    return [f"  With these settings obsmask costs more than it saves under {', '.join(dearer)}: "
            "with a prompt cache, each newly masked result makes the provider bill the "
            "history after it again."]


def _holdout_note(settings: ProxySettings) -> str:
    """What the proxy does with a held-out conversation, in a few words."""
    return (f"(holdout_percent = {settings.policy.holdout_percent}: the proxy leaves "
            "held-out conversations unmasked, so their bill with obsmask is their bill "
            "without it)")


def _headline(total: TotalFigures, settings: ProxySettings) -> str:
    line = (f"The bill, in input tokens at the base input price: {total.conversations} "
            f"conversation{'s' if total.conversations != 1 else ''}")
    if settings.policy.enabled and settings.policy.holdout_percent > 0:
        line += f", {total.held_out} of them held out"
    return line + (f", {total.requests} requests replayed "
                   f"({total.recorded_requests} recorded)")


def _holdout_lines(total: TotalFigures, settings: ProxySettings,
                   obsmask_model: str) -> list[str]:
    """Under the total: which share of it is the holdout group, and the
    bill of the other conversations alone."""
    if not total.held_out:
        return []
    others = total.conversations - total.held_out
    if not others:
        return [f"  Every conversation is held out {_holdout_note(settings)}: these bills "
                "say nothing of masking; lower holdout_percent to measure it."]
    one = total.held_out == 1
    return [f"  {total.held_out} of the {total.conversations} conversations "
            f"{'is' if one else 'are'} held out {_holdout_note(settings)}; "
            f"{'it is' if one else 'they are'} in the total above, which "
            f"{'it brings' if one else 'they bring'} closer to 1.00x. The {others} "
            f"conversation{'s' if others != 1 else ''} not held out, alone:",
            *_bill_table(total.not_held_out_bills, obsmask_model)]


def _price_model_notes() -> list[str]:
    notes = ["Price models (per input token, relative to the base input price):"]
    notes += [f"  {model.name}: {SENSITIVITY_NOTE if model.sensitivity else model.description}"
              for model in REPORTED_MODELS]
    return notes


def _token_lines(tokens: TokenFigures, indent: str = "  ") -> list[str]:
    before, after = tokens.input_tokens
    cached = "; ".join(
        f"{title} {tokens.cached[rule][0]:,} -> {tokens.cached[rule][1]:,}"
        for rule, title in RULE_TITLES.items())
    return [
        f"{indent}input tokens sent: {before:,} without obsmask, {after:,} with it "
        f"({_change(before, after)})",
        f"{indent}read from the cache (estimate): {cached}",
        f"{indent}tool results in the last request: {tokens.tool_results_last_request:,}, "
        f"masked with obsmask: {tokens.masked_last_request:,}",
    ]


def _conversation_lines(figures: ConversationFigures, obsmask_model: str) -> list[str]:
    conversation = figures.conversation
    head = (f"  #{conversation.number} {conversation.name}: {conversation.session.fmt.name}, "
            f"{figures.requests} requests replayed ({len(conversation.requests)} recorded; "
            f"the last: {conversation.last.where})")
    if figures.held_out:
        head += "; held out (holdout_percent): the proxy leaves it unmasked"
    return [head, *_bill_table(figures.bills, obsmask_model, figures.worst_so_far, "    "),
            *_token_lines(figures.tokens, "    ")]


def _optional(value: int | None) -> str:
    return f"{value:,}" if value is not None else "-"


def _comparison_lines(figures: ConversationFigures, per_request: bool) -> list[str]:
    found = figures.comparisons
    rule = cache_rule(figures.conversation.session.fmt)
    paired = [c for c in found if c.without is not None and c.with_obsmask is not None]
    masked = sum(c.request.action == Action.MASKED for c in found)
    lines = [f"  #{figures.conversation.number} {figures.conversation.name}: {len(found)} "
             f"requests report usage, {len(paired)} of them found in the replay; "
             f"{masked} were masked when recorded (the provider received the masked body)"]
    if not paired:
        return lines
    rows = [
        ("provider", sum(c.provider.prompt for c in paired),
         sum(c.provider.cached for c in paired),
         _sum_optional([c.provider.written for c in paired])),
        ("replay, without obsmask", sum(c.without.input_tokens for c in paired if c.without),
         sum(c.without.cached[rule] for c in paired if c.without), None),
        ("replay, with obsmask",
         sum(c.with_obsmask.input_tokens for c in paired if c.with_obsmask),
         sum(c.with_obsmask.cached[rule] for c in paired if c.with_obsmask), None),
    ]
    lines.append(f"    {'':<26}{'prompt tokens':>15}{'read from cache':>17}{'written to it':>15}")
    lines += [f"    {name:<26}{prompt:>15,}{cached:>17,}{_optional(written):>15}"
              for name, prompt, cached, written in rows]
    lines.append(f"    (the replay's cache: {RULE_TITLES[rule]})")
    if per_request:
        lines += _request_lines(found, rule)
    return lines


def _sum_optional(values: Sequence[int | None]) -> int | None:
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _request_lines(found: Sequence[RequestComparison], rule: str) -> list[str]:
    files = ", ".join(dict.fromkeys(c.request.file for c in found))
    lines = [f"    request by request ({files}; prompt / read from the cache / written to it):",
             f"    {'request':>7}{'flow':>6}  {'when recorded':<15}{'provider':>24}"
             f"{'replay without':>20}{'replay with':>20}"]
    for c in found:
        provider = (f"{c.provider.prompt:,} / {c.provider.cached:,} / "
                    f"{_optional(c.provider.written)}")
        without = (f"{c.without.input_tokens:,} / {c.without.cached[rule]:,}"
                   if c.without else "-")
        with_obsmask = (f"{c.with_obsmask.input_tokens:,} / {c.with_obsmask.cached[rule]:,}"
                        if c.with_obsmask else "-")
        number = str(c.replayed + 1) if c.replayed is not None else "-"
        sent = c.request.action or "-"
        lines.append(f"    {number:>7}{_optional(c.request.flow):>6}  {sent:<15}{provider:>24}"
                     f"{without:>20}{with_obsmask:>20}")
    return lines


def text_report(measurement: Measurement, *, per_request: bool = False) -> str:
    settings = measurement.settings
    obsmask_model = settings.policy.price_model if settings.policy.enabled else ""
    total = measurement.total
    lines = [
        "obsmask measure: the bill of these sessions without and with obsmask, "
        "estimated by a replay (not your provider's bill)",
        "",
        "Inputs:",
        *(_input_line(summary) for summary in measurement.inputs),
        "",
        *_settings_lines(settings),
        "",
        *(("The proxy's own bill (its ledger's estimate), as its end-of-run summary gives it:",
           *(f"  {line}" for line in measurement.proxy_bill), "")
          if measurement.proxy_bill else ()),
        _headline(total, settings),
        *_bill_table(total.bills, obsmask_model),
        *_dearer_line(total.bills),
        *_holdout_lines(total, settings, obsmask_model),
        "",
        "Per conversation:",
    ]
    for figures in measurement.conversations:
        lines += _conversation_lines(figures, obsmask_model)
    if len(measurement.conversations) > 1:
        lines += ["", "Tokens, all conversations:", *_token_lines(total.tokens)]
    with_usage = [figures for figures in measurement.conversations if figures.comparisons]
    if with_usage:
        lines += ["", "The provider's own figures (flow metadata obsmask.provider_usage), next to "
                  "the replay's estimate for the same requests:"]
        for figures in with_usage:
            lines += _comparison_lines(figures, per_request)
    lines += ["", *_price_model_notes(), "", HOW]
    return "\n".join(lines)
