"""bench_cache's output: one JSON document, or Markdown tables."""

from __future__ import annotations

from benchlib.cache.adversarial import ADVERSARIAL_FAMILIES
from benchlib.cache.cache_edges import CACHE_EDGE_FAMILIES
from benchlib.cache.policies import BASELINE, policy_settings
from benchlib.cache.run import CacheRun
from benchlib.cache.summary import ALL, SESSION_KINDS, summary_json
from benchlib.cache.synthetic import SYNTHETIC_DISTRIBUTION
from benchlib.cache.targets import (
    CACHED_MODELS,
    NOT_IN_RUN,
    PROTOCOL_TARGET,
    ProtocolResult,
    TargetResult,
    targets_json,
)
from obsmask_core.conversation.billing.price_models import OPENAI_CACHE_STEP
from obsmask_core.offline.cache.billing import (
    ALL_BENCHMARK_NAMES,
    ALL_MODELS,
    BENCHMARK_NAMES,
    benchmark_name,
    model_description,
)
from obsmask_core.offline.cache.clients import CLAUDE_CODE_FIRST_BLOCK
from obsmask_core.offline.cache.model import (
    LOOKBACK_BLOCKS,
    MAX_BREAKPOINTS,
    MIN_CACHED_TOKENS,
    OPENAI_LIFETIME,
)
from obsmask_core.offline.cache.prompt_blocks import FIVE_MINUTES, ONE_HOUR
from obsmask_core.offline.cache.sessions import PACE_SECONDS
from obsmask_core.offline.cache.so_far import FIRST_JUDGED_REQUEST
from obsmask_core.shared.tokens import TOKENS_PER_MESSAGE, TOKENS_REPLY_PRIMING

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
    "cache": {
        "anthropic": f"breakpoints: the blocks with cache_control, and the last block for a "
                     f"top-level cache_control; more than {MAX_BREAKPOINTS}: the API's 400, "
                     "a protocol error, billed as plain input; a request reads the longest "
                     "live entry equal to one of its prefixes ending at the boundaries after "
                     f"blocks b, b-1, ..., b-{LOOKBACK_BLOCKS - 1} of each breakpoint b "
                     "(content compared without cache_control, same model), then writes an "
                     "entry at each breakpoint whose prefix has at least "
                     f"{MIN_CACHED_TOKENS} tokens; read 0.1, from the read boundary to the "
                     "last breakpoint written 1.25 (2.0 up to a breakpoint with ttl 1h), "
                     f"after it 1.0; an entry lives {FIVE_MINUTES:g} s ({ONE_HOUR:g} s with "
                     "ttl 1h) after it was last written or read",
        "openai": "the longest token prefix shared with any earlier request of the replay "
                  f"sent less than {OPENAI_LIFETIME:g} s before (a request keeps every "
                  f"prefix it holds alive); 0 under {MIN_CACHED_TOKENS}, else "
                  f"{MIN_CACHED_TOKENS} + {OPENAI_CACHE_STEP} * floor((shared - "
                  f"{MIN_CACHED_TOKENS}) / {OPENAI_CACHE_STEP})",
        "anthropic_prefix": "the longest common token prefix with the previous request of "
                            f"the replay, 0 under {MIN_CACHED_TOKENS}, else all of it; every "
                            "other token a write at 1.25",
        "scope": "each session replayed under each policy has caches of its own",
    },
    "price_models": {benchmark_name(model): model_description(model) for model in ALL_MODELS},
    "protocol_errors": "per policy and session: forwarded bodies with more than "
                       f"{MAX_BREAKPOINTS} breakpoints (over_four_breakpoints), and those "
                       "where a breakpoint of the client's body is not on the same block "
                       "with the same ttl (client_breakpoint_moved_or_removed)",
    "outcomes": "per policy and session: mask_request_body's outcomes (masked, unchanged, "
                "refused, unreadable; all but masked send the client's body)",
    "ratios": f"a policy's cost over {BASELINE!r}'s on the same session; mean and "
              "max over sessions; total = sum of costs over sum of baseline costs",
    "worst_prefix_ratio": f"per session: the highest ratio of the cost so far (requests 1 "
                          f"to n) to {BASELINE!r}'s cost so far, over n >= "
                          f"{FIRST_JUDGED_REQUEST}; worst_prefix_request is that n "
                          "(requests count from 1); null when a session has fewer requests. "
                          "In the summary: its max over the sessions of a group",
    "ratio_at_tool_turns": "adversarial uniform sessions: tool turns k -> the cost so far "
                           "after request k + 1 (the first holding turn k's result) over "
                           f"{BASELINE!r}'s, the final ratio of the session cut after k "
                           "tool turns",
    "masked_results_last_request": "items of the last request the policy "
                                   "changed (masked or clipped tool results)",
}


def json_report(run: CacheRun, elapsed_seconds: float) -> dict[str, object]:
    return {
        "requests": run.requests,
        "model": MODEL_DESCRIPTION,
        "policies": {name: {"source": choice.source, "settings": policy_settings(choice.policy)}
                     for name, choice in run.policies.items()},
        "sessions_by_format": {fmt: sum(1 for s in run.figures if s["format"] == fmt)
                    for fmt in dict.fromkeys(s["format"] for s in run.figures)},
        "synthetic_distribution": SYNTHETIC_DISTRIBUTION,
        "adversarial_families": ADVERSARIAL_FAMILIES,
        "cache_edge_families": CACHE_EDGE_FAMILIES,
        "first_judged_request": FIRST_JUDGED_REQUEST,
        "sessions": run.figures,
        "summary": summary_json(run.summary),
        "targets": targets_json(run.targets, run.protocol),
        "information_checks": targets_json(run.information),
        "elapsed_seconds": round(elapsed_seconds, 1),
    }


def _ratio_cell(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _summary_table(run: CacheRun) -> list[str]:
    counts = next(iter(run.summary.values()))
    kinds = [kind for kind in SESSION_KINDS if kind in counts]
    header = "| policy | price model | " + " | ".join(
        f"{kind} ({counts[kind].sessions}): mean | max | worst so far" for kind in kinds) + " |"
    lines = [header, "| --- | --- |" + " ---: | ---: | ---: |" * len(kinds)]
    for policy, groups in run.summary.items():
        if policy == BASELINE:
            continue
        for model in ALL_BENCHMARK_NAMES:
            cells = []
            for kind in kinds:
                figures = groups[kind].models[model]
                cells.append(f"{figures['mean']:.2f}x | {figures['max']:.2f}x | "
                             f"{_ratio_cell(figures['worst_prefix'])}")
            label = model if model in BENCHMARK_NAMES else f"({model})"
            lines.append(f"| {policy} | {label} | " + " | ".join(cells) + " |")
    return lines


def _checkpoint_table(run: CacheRun, policy: str) -> list[str]:
    """The bill so far of the sessions with checkpoints (the uniform ones)."""
    rows = [s for s in run.figures if "ratio_at_tool_turns" in s["policies"].get(policy, {})]
    if not rows:
        return []
    turns = list(rows[0]["policies"][policy]["ratio_at_tool_turns"])
    lines = [f"Bill so far of {policy!r} over no masking's after k tool turns (the final "
             "ratio of the session cut there):", "",
             "| session | price model | " + " | ".join(f"k={k}" for k in turns) + " |",
             "| --- | --- |" + " ---: |" * len(turns)]
    for session in rows:
        at = session["policies"][policy]["ratio_at_tool_turns"]
        for model in CACHED_MODELS:
            cells = " | ".join(f"{at[k][model]:.3f}" if k in at and at[k][model] is not None
                               else "-" for k in turns)
            lines.append(f"| {session['name']} | {model} | {cells} |")
    return lines


def _subgroups(result: TargetResult, by_group: dict[str, float | None]) -> str:
    """The figure of each group inside the target's: the kinds for "all",
    the formats for "real"."""
    group = result.target.group
    names = ([name for name in SESSION_KINDS if name in by_group] if group == ALL
             else [name for name in by_group if name.startswith(f"{group}/")])
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
        lines.append(f"- {mark} {name} (threshold {result.target.threshold}): "
                     + "; ".join(parts))
    return lines


def markdown(run: CacheRun) -> str:
    """The README's table: every policy but the baseline, mean, max and worst
    bill so far per group; then the targets."""
    lines = [
        f"Cost relative to no masking (1.00 = same bill), {run.requests} requests. "
        "mean, max: of the sessions' final ratios; worst so far: the highest ratio of "
        f"the bill so far to no masking's, after any request from the "
        f"{FIRST_JUDGED_REQUEST}th on, over the sessions.",
        "",
        *_summary_table(run),
        "",
        "(anthropic_prefix): Anthropic's prices with the former reading of its cache (the "
        "longest common prefix with the previous request, whatever the breakpoints); a "
        "sensitivity check, not a target.",
    ]
    checkpoints = _checkpoint_table(run, "recommended")
    if checkpoints:
        lines += ["", *checkpoints]
    lines += ["", "Targets:", *_target_lines(run.targets), _protocol_line(run.protocol)]
    if run.information:
        lines += ["", "For information, not a target:", *_target_lines(run.information)]
    lines += ["", "Policies:"]
    for name, choice in run.policies.items():
        outcomes = run.summary[name][ALL].outcomes if name in run.summary else {}
        counted = ", ".join(f"{outcome} {count}" for outcome, count in outcomes.items())
        lines.append(f"- {name}: {choice.source}" + (f" (requests: {counted})" if counted else ""))
    return "\n".join(lines)


def per_session_markdown(run: CacheRun) -> str:
    """Every session's final ratios and worst bill so far (with its request
    number), per policy but the baseline."""
    policies = [name for name in run.policies if name != BASELINE]
    lines = ["| session | kind | format | requests | policy | "
             + " | ".join(ALL_BENCHMARK_NAMES) + " | "
             + " | ".join(f"worst so far: {m}" for m in ALL_BENCHMARK_NAMES) + " | masked at end |",
             "| --- | --- | --- | ---: | --- |" + " ---: |" * (2 * len(ALL_BENCHMARK_NAMES) + 1)]
    for session in run.figures:
        for policy in policies:
            figures = session["policies"][policy]
            ratios = " | ".join(f"{figures['ratio'][m]:.3f}" for m in ALL_BENCHMARK_NAMES)
            worst = " | ".join(
                f"{value:.3f} @{figures['worst_prefix_request'][m]}"
                if (value := figures["worst_prefix_ratio"][m]) is not None else "-"
                for m in ALL_BENCHMARK_NAMES)
            lines.append(f"| {session['name']} | {session['kind']} | {session['format']} "
                         f"| {session['requests']} | {policy} | {ratios} | {worst} "
                         f"| {figures['masked_results_last_request']}"
                         f"/{figures['tool_results_last_request']} |")
    return "\n".join(lines)
