"""bench_cache's output: one JSON document, or Markdown tables."""

from __future__ import annotations

from benchlib.cache.adversarial import ADVERSARIAL_FAMILIES
from benchlib.cache.cache_edges import CACHE_EDGE_FAMILIES
from benchlib.cache.claude_code import CLAUDE_CODE_FAMILY
from benchlib.cache.family_figures import FamilySessionFigures
from benchlib.cache.pause_report import (
    COLD_SHARE_DEFINITION,
    drawn_text,
    pause_json,
    pause_table,
)
from benchlib.cache.pauses import PAUSE_DISTRIBUTION, PAUSE_FAMILIES, PAUSE_FAMILY_NAMES
from benchlib.cache.policies import BASELINE, policy_settings
from benchlib.cache.run import CacheRun
from benchlib.cache.summary import ALL, OVER, SESSION_KINDS, outcomes, summary_json
from benchlib.cache.synthetic import SYNTHETIC_DISTRIBUTION
from benchlib.cache.targets import (
    CACHED_LINES,
    NOT_IN_RUN,
    PROTOCOL_TARGET,
    ProtocolResult,
    TargetResult,
    targets_json,
)
from obsmask_core.offline.cache.clients import CLAUDE_CODE_FIRST_BLOCK
from obsmask_core.offline.cache.families import LOOKBACKS, table_agreement
from obsmask_core.offline.cache.model import MAX_BREAKPOINTS, OPENAI_LIFETIME
from obsmask_core.offline.cache.prompt_blocks import FIVE_MINUTES, ONE_HOUR
from obsmask_core.offline.cache.sessions import PACE_SECONDS
from obsmask_core.offline.cache.so_far import FIRST_JUDGED_REQUEST
from obsmask_core.shared.message_tokens import TOKENS_PER_MESSAGE, TOKENS_REPLY_PRIMING

MODEL_DESCRIPTION: dict[str, object] = {
    "requests": "each request body built as the client sends it (JSON bytes; Anthropic "
                "Messages as Claude Code sends them: system as two text blocks, "
                f"{CLAUDE_CODE_FIRST_BLOCK!r} and the session's system text, both with "
                "cache_control ephemeral, and cache_control ephemeral on the last content "
                "block of the last message; Chat Completions and Responses as they are), "
                "passed through obsmask's mask_request_body, and the forwarded bytes parsed "
                "and billed; requests every "
                f"{PACE_SECONDS:g} s unless a session says otherwise",
    "tokens": "blocks in cache order: each tool definition, the system blocks (Anthropic's "
              "system, Responses' instructions), each item's content blocks (one for a "
              f"string content); per block the cl100k_base tokens of its string values "
              f"(cache_control left out, a plain text block as its text), "
              f"{TOKENS_PER_MESSAGE} framing tokens on the first block of each item and of "
              f"the system; {TOKENS_REPLY_PRIMING} reply-priming tokens after the last "
              "block, never cached",
    "families": "each session is replayed under every model family of its wire format: "
                "each request carries the family's model id in its model member before it "
                "goes through obsmask (price_model auto prices it by that model's row), and "
                "what obsmask forwards is billed under the family's own prices and cache "
                "rule (written from the providers' pages, not read from obsmask's table; "
                "families_table says whether the table agrees). A policy whose "
                "price_model has no cache never reads the model: it is replayed once per "
                "session and billed under every family",
    "cache": {
        "anthropic_breakpoints": f"breakpoints: the blocks with cache_control, and the last "
                     f"block for a top-level cache_control; more than {MAX_BREAKPOINTS}: the "
                     "API's 400, a protocol error, billed as plain input; a request reads the "
                     "longest live entry equal to one of its prefixes ending at the "
                     "boundaries each breakpoint b looks back to, strict: after blocks b, "
                     f"b-1, ..., b-{LOOKBACKS['strict'] - 1}; lenient: down to b-"
                     f"{LOOKBACKS['lenient'] - 1} (content compared without cache_control, "
                     "same model), then writes an entry at each breakpoint whose prefix has "
                     "at least the family's minimum; reads, writes up to the last breakpoint "
                     "written (1-hour writes up to a breakpoint with ttl 1h) at the family's "
                     f"prices, after it 1.0; an entry lives {FIVE_MINUTES:g} s ({ONE_HOUR:g} "
                     "s with ttl 1h) after it was last written or read",
        "openai_prefix_steps": "the longest token prefix shared with any earlier request "
                               f"of the replay sent less than {OPENAI_LIFETIME:g} s before "
                               "(a request keeps every prefix it holds alive); 0 under the "
                               "minimum, else minimum + 128 * floor((shared - minimum) / "
                               "128); every other token at 1.0",
        "openai_prefix": "the same, the whole shared prefix from the minimum (no steps); "
                         "every token not read is a write at the family's write price",
        "none": "every input token at 1.0",
        "scope": "each session replayed under each policy and family has caches of its "
                 "own, one per reading",
    },
    "protocol_errors": "per policy and session: forwarded bodies with more than "
                       f"{MAX_BREAKPOINTS} breakpoints (over_four_breakpoints), and those "
                       "where a breakpoint of the client's body is not on the same block "
                       "with the same ttl (client_breakpoint_moved_or_removed)",
    "outcomes": "per policy and session: mask_request_body's outcomes (masked, unchanged, "
                "refused, unreadable; all but masked send the client's body)",
    "ratios": f"a policy's cost over {BASELINE!r}'s on the same session and line; mean "
              "and max over sessions; total = sum of costs over sum of baseline costs",
    "worst_prefix_ratio": f"per session: the highest ratio of the cost so far (requests 1 "
                          f"to n) to {BASELINE!r}'s cost so far, over n >= "
                          f"{FIRST_JUDGED_REQUEST}; worst_prefix_request is that n "
                          "(requests count from 1); null when a session has fewer requests. "
                          "In the summary: its max over the sessions of a group, and the "
                          f"sessions over {OVER}x (over_1_03_sessions)",
    "ratio_at_tool_turns": "adversarial uniform sessions: tool turns k -> the cost so far "
                           "after request k + 1 (the first holding turn k's result) over "
                           f"{BASELINE!r}'s, the final ratio of the session cut after k "
                           "tool turns",
    "masked_results_last_request": "items of the last request the policy "
                                   "changed (masked or clipped tool results)",
}


HEADLINE_POLICY = "recommended"


def family_lines(run: CacheRun, policy: str = HEADLINE_POLICY) -> dict[str, dict[str, object]]:
    """Per line (family and reading): the policy's mean final ratio over the
    sessions the line bills (and over the real ones), its worst bill so far
    from request FIRST_JUDGED_REQUEST on, and the sessions over 1.03x."""
    groups = run.summary.get(policy, {})
    every = groups.get(ALL)
    real = groups.get("real")
    out: dict[str, dict[str, object]] = {}
    for family in run.families:
        for line in family.lines():
            figures = every.lines.get(line.name) if every is not None else None
            if figures is None:
                continue
            real_figures = real.lines.get(line.name) if real is not None else None
            out[line.name] = {
                "family": family.label, "model": family.model, "reading": line.reading or None,
                "prices": family.describe(),
                "sessions": figures["sessions"],
                "mean": figures["mean"],
                "mean_real": real_figures["mean"] if real_figures is not None else None,
                "worst_prefix": figures["worst_prefix"],
                "worst_prefix_session": figures["worst_prefix_session"],
                "worst_prefix_request": figures["worst_prefix_request"],
                "over_1_03": figures["over_1_03"],
                "over_1_03_sessions": figures["over_1_03_sessions"],
            }
    return out


def json_report(run: CacheRun, elapsed_seconds: float) -> dict[str, object]:
    return {
        "requests": run.requests,
        "model": MODEL_DESCRIPTION,
        "families": family_lines(run),
        "families_table": table_agreement(),
        "policies": {name: {"source": choice.source, "settings": policy_settings(choice.policy),
                            "outcomes": outcomes(run.figures, name)}
                     for name, choice in run.policies.items()},
        "sessions_by_format": {fmt: sum(1 for s in run.figures if s["format"] == fmt)
                               for fmt in dict.fromkeys(s["format"] for s in run.figures)},
        "sessions_by_kind": {kind: sum(1 for s in run.figures if s["kind"] == kind)
                             for kind in dict.fromkeys(s["kind"] for s in run.figures)},
        "synthetic_distribution": SYNTHETIC_DISTRIBUTION,
        "adversarial_families": ADVERSARIAL_FAMILIES,
        "cache_edge_families": CACHE_EDGE_FAMILIES,
        "claude_code_family": CLAUDE_CODE_FAMILY,
        "first_judged_request": FIRST_JUDGED_REQUEST,
        "sessions": run.figures,
        "summary": summary_json(run.summary),
        "targets": targets_json(run.targets, run.protocol),
        "information_checks": targets_json(run.information),
        # The pause families, under policies of their own: apart from the
        # sessions, summary and targets above (None: not in this run).
        "pauses": pause_json(run.pauses, run.families) if run.pauses is not None else None,
        "elapsed_seconds": round(elapsed_seconds, 1),
    }


def _ratio_cell(value: object) -> str:
    return f"{value:.3f}x" if isinstance(value, float) else "-"


def _family_table(run: CacheRun) -> list[str]:
    """The headline: per line, the shipped settings' mean and worst bill so
    far, the sessions over 1.03x; the plain window's beside them."""
    spec = run.summary.get("spec", {}).get(ALL)
    lines = ["| family | reading | model | sessions | mean (real) | mean (all) | worst so far "
             f"| over {OVER}x | spec: mean | spec: worst so far |",
             "| --- | --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: |"]
    for name, row in family_lines(run).items():
        where = (f" ({row['worst_prefix_session']}, request {row['worst_prefix_request']})"
                 if row["worst_prefix_session"] else "")
        over = row["over_1_03_sessions"]
        assert isinstance(over, list)
        spec_row = spec.lines.get(name) if spec is not None else None
        lines.append(
            f"| {row['family']} | {row['reading'] or '-'} | {row['model'] or '(own)'} "
            f"| {row['sessions']} | {_ratio_cell(row['mean_real'])} "
            f"| {_ratio_cell(row['mean'])} | {_ratio_cell(row['worst_prefix'])}{where} "
            f"| {len(over)}{': ' + ', '.join(over) if over else ''} "
            f"| {_ratio_cell(spec_row['mean'] if spec_row else None)} "
            f"| {_ratio_cell(spec_row['worst_prefix'] if spec_row else None)} |")
    return lines


def _summary_table(run: CacheRun) -> list[str]:
    counts = run.summary[BASELINE]
    kinds = [kind for kind in SESSION_KINDS if kind in counts]
    header = "| policy | line | " + " | ".join(
        f"{kind}: mean | max | worst so far" for kind in kinds) + " |"
    lines = [header, "| --- | --- |" + " ---: | ---: | ---: |" * len(kinds)]
    names = [line.name for family in run.families for line in family.lines()]
    for policy, groups in run.summary.items():
        if policy == BASELINE:
            continue
        for name in names:
            cells = []
            for kind in kinds:
                figures = groups[kind].lines.get(name)
                cells.append(f"{figures['mean']:.2f}x | {figures['max']:.2f}x | "
                             f"{_ratio_cell(figures['worst_prefix'])}" if figures
                             else "- | - | -")
            lines.append(f"| {policy} | {name} | " + " | ".join(cells) + " |")
    return lines


def _checkpoint_table(run: CacheRun, policy: str) -> list[str]:
    """The bill so far of the sessions with checkpoints (the uniform ones)."""
    rows = [s for s in run.figures
            if any("ratio_at_tool_turns" in by_policy.get(policy, {})
                   for by_policy in s["lines"].values())]
    if not rows:
        return []
    first = next(iter(rows[0]["lines"].values()))[policy]
    turns = list(first.get("ratio_at_tool_turns", {}))
    lines = [f"Bill so far of {policy!r} over no masking's after k tool turns (the final "
             "ratio of the session cut there):", "",
             "| session | line | " + " | ".join(f"k={k}" for k in turns) + " |",
             "| --- | --- |" + " ---: |" * len(turns)]
    for session in rows:
        for line, by_policy in session["lines"].items():
            if line not in CACHED_LINES:
                continue
            at = by_policy[policy].get("ratio_at_tool_turns", {})
            cells = " | ".join(f"{value:.3f}" if (value := at.get(k)) is not None else "-"
                               for k in turns)
            lines.append(f"| {session['name']} | {line} | {cells} |")
    return lines


def _subgroups(result: TargetResult, by_group: dict[str, float | None]) -> str:
    """The figure of each group inside the target's: the kinds for "all",
    the formats for "real"."""
    group = result.target.group
    names = ([name for name in (*SESSION_KINDS, *PAUSE_FAMILY_NAMES) if name in by_group]
             if group == ALL else [name for name in by_group if name.startswith(f"{group}/")])
    parts = [f"{name} {value:.3f}" for name in names
             if (value := by_group[name]) is not None]
    return f" [{', '.join(parts)}]" if len(parts) > 1 else ""


def _protocol_line(protocol: ProtocolResult) -> str:
    counts = ", ".join(f"{policy} {sum(errors.values())}"
                       for policy, errors in protocol.by_policy.items())
    return (f"- {'PASS' if protocol.passed else 'FAIL'} {PROTOCOL_TARGET} (threshold 0): "
            f"forwarded bodies with more than four breakpoints or a client breakpoint moved "
            f"or removed: {counts}")


def _target_lines(results: list[TargetResult]) -> list[str]:
    lines = []
    for result in results:
        name = result.target.name
        if result.checks is None:
            lines.append(f"- {name}: not evaluated ({NOT_IN_RUN})")
            continue
        parts = []
        for model, check in result.checks.items():
            if check.value is None:
                parts.append(f"{model}: nothing to judge")
                continue
            where = [part for part in (check.session, check.request) if part is not None]
            parts.append(f"{model} {check.value:.3f}"
                         + (f" ({', request '.join(map(str, where))})" if where else "")
                         + _subgroups(result, check.by_group))
        mark = {True: "PASS", False: "FAIL", None: "----"}[result.passed]
        lines.append(f"- {mark} {name} (threshold {result.target.threshold_text()}): "
                     + "; ".join(parts))
    return lines


def markdown(run: CacheRun) -> str:
    """The families' table (the shipped settings under each family and
    reading), every policy per group, then the targets."""
    lines = [
        f"Cost relative to no masking (1.00 = same bill), {run.requests} requests. mean: of "
        "the sessions' final ratios; worst so far: the highest ratio of the bill so far to "
        f"no masking's, after any request from the {FIRST_JUDGED_REQUEST}th on, over the "
        f"sessions; over {OVER}x: the sessions whose bill so far passes it.",
        "",
        f"The shipped settings ({HEADLINE_POLICY!r}) per model family:",
        "",
        *_family_table(run),
        "",
        "Every policy, per kind of session:",
        "",
        *_summary_table(run),
    ]
    checkpoints = _checkpoint_table(run, HEADLINE_POLICY)
    if checkpoints:
        lines += ["", *checkpoints]
    lines += ["", "Targets:", *_target_lines(run.targets), _protocol_line(run.protocol)]
    if run.information:
        lines += ["", "For information, not a target:", *_target_lines(run.information)]
    disagree = [f"{name} ({row['model']} -> {row['table_row']})"
                for name, row in table_agreement().items() if not row["same_terms"]]
    if disagree:
        lines += ["", "obsmask's model table bills these families under other terms than "
                  "the replay: " + ", ".join(disagree)]
    lines += _pause_lines(run)
    lines += ["", "Policies:"]
    for name, choice in run.policies.items():
        counted = "; ".join(f"{family}: " + ", ".join(f"{outcome} {count}"
                                                      for outcome, count in found.items())
                            for family, found in outcomes(run.figures, name).items())
        lines.append(f"- {name}: {choice.source}" + (f" (requests: {counted})" if counted else ""))
    return "\n".join(lines)


def _pause_lines(run: CacheRun) -> list[str]:
    """The pause families' section: how the gaps are drawn, the table, the
    targets."""
    pauses = run.pauses
    if pauses is None:
        return []
    share = ", ".join(f"{family.name} {family.long_share:g}" for family in PAUSE_FAMILIES)
    long_gaps = PAUSE_DISTRIBUTION["long_gap_seconds"]
    assert isinstance(long_gaps, dict)
    return [
        "", "Pause families: the real and Claude Code-shaped sessions with gaps between "
        f"requests that outlive the caches ({pauses.requests} requests). A gap is long with "
        f"probability {share}, else {PAUSE_DISTRIBUTION['paced_gap_seconds']}; a long "
        "gap is " + " or ".join(f"{range_} with probability {p:g}"
                                for range_, p in long_gaps.items())
        + " (the hour-plus share is our assumption). Drawn: " + drawn_text(pauses) + ".",
        "",
        f"The shipped settings ({HEADLINE_POLICY!r}) with cold turns and without them "
        "(cold_turns = false). Share of saving from cold turns: " + COLD_SHARE_DEFINITION
        + ".",
        "",
        *pause_table(pauses, run.families),
        "",
        "Pause targets:", *_target_lines(pauses.targets), _protocol_line(pauses.protocol),
        "",
        "For information, not a target:", *_target_lines(pauses.information),
    ]


def _per_session_table(figures: list[FamilySessionFigures], names: list[str]) -> list[str]:
    policies = [name for name in names if name != BASELINE]
    lines = ["| session | kind | format | requests | line | "
             + " | ".join(f"{policy}: ratio | worst so far" for policy in policies) + " |",
             "| --- | --- | --- | ---: | --- |" + " ---: | ---: |" * len(policies)]
    for session in figures:
        for line, by_policy in session["lines"].items():
            cells = []
            for policy in policies:
                found = by_policy[policy]
                worst = found["worst_prefix_ratio"]
                cells.append(f"{_ratio_cell(found['ratio'])} | "
                             + (f"{worst:.3f}x @{found['worst_prefix_request']}"
                                if worst is not None else "-"))
            lines.append(f"| {session['name']} | {session['kind']} | {session['format']} "
                         f"| {session['requests']} | {line} | " + " | ".join(cells) + " |")
    return lines


def per_session_markdown(run: CacheRun) -> str:
    """Every session's final ratio and worst bill so far (with its request
    number), per line and policy but the baseline; then the paused
    sessions', under their own policies."""
    lines = _per_session_table(run.figures, list(run.policies))
    if run.pauses is not None:
        lines += ["", *_per_session_table(run.pauses.figures, list(run.pauses.policies))]
    return "\n".join(lines)
