"""The targets the shipped settings must meet, checked on a run's summary,
per line: a model family under one reading of its cache
(``obsmask_core.offline.cache.families``: each Anthropic family under the
strict and the lenient reading of the lookback).

With the shipped settings ("recommended"):

- the bill so far never goes up: over every session of the run that a
  line bills (real in every wire format, Claude Code-shaped, synthetic,
  adversarial, cache_edge, input), after every request from the
  ``FIRST_JUDGED_REQUEST``-th on, the cost so far is at most 1.03x that of
  no masking so far, under every line with a cache;
- on the real sessions, no line's mean is above that of the same settings
  with one price per provider (``ONE_PRICE_POLICY``, as obsmask priced
  requests before prices per model), where that kept the bill so far
  within 1.03x and billed the line's cache rule as it runs
  (``ONE_PRICE_LINES``);
- the no_cache profile averages at most 0.70x when nothing is cached, over
  the sessions of the run the no_cache line bills; and no policy's
  forwarded body breaks Anthropic's breakpoint rules (``PROTOCOL_TARGET``:
  more than four breakpoints, or a client's breakpoint moved or removed).

On the pause families (``benchlib.cache.pauses``: the real and Claude
Code-shaped sessions with gaps that outlive the caches, replayed under the
shipped settings with and without cold turns), ``PAUSE_TARGETS``:

- the bill so far with cold turns at most 1.03x from the
  ``FIRST_JUDGED_REQUEST``-th request on, in every paused session under
  every line with a cache;
- where the cache reads at 0.025x (``LOW_READ_LINES``: Fable 5.1 under
  both readings), the mean final ratio with cold turns at least
  ``COLD_TURNS_MARGIN`` (0.05) below the mean without them (the same
  settings with ``cold_turns = false``), over the paused sessions; under
  the other lines the same is shown for information
  (``PAUSE_INFORMATION``).

``INFORMATION`` holds checks that are shown but are not targets: every
session's final cost at most 1.05x; the real sessions' mean at most 0.80x
where the cache reads at 0.1x (``MEAN_LINES``: Sonnet-class under both
readings, GPT-5 before 5.6), the issue's aim, which these sessions' many
small results keep just above it; and the same under the families whose
reads are not 0.1x (Opus 5.5's 0.05x, Fable 5.1's 0.025x, GPT-4o's 0.5x)
or whose writes are billed (GPT-5.6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchlib.cache.policies import BASELINE, NO_COLD_TURNS, PAUSE_POLICY
from benchlib.cache.summary import ALL, LineFigures, Summary
from obsmask_core.offline.cache.families import LINES, NO_CACHE, OPENAI_PREFIX
from obsmask_core.offline.cache.family_replay import ONE_PRICE_POLICY
from obsmask_core.offline.cache.so_far import FIRST_JUDGED_REQUEST

NOT_IN_RUN = "policy not in this run"
NO_CACHE_LINE = next(line.name for line in LINES if line.family.cache == NO_CACHE)
CACHED_LINES = tuple(line.name for line in LINES if line.family.cache != NO_CACHE)
# The mean target's lines: reads at 0.1x, writes at 1.25x under
# Anthropic's breakpoints or free under OpenAI's steps.
MEAN_LINES = ("sonnet/strict", "sonnet/lenient", "gpt_5")
OTHER_MEAN_LINES = tuple(name for name in CACHED_LINES if name not in MEAN_LINES)
# The lines whose cache rule one price per provider billed as it runs
# (Anthropic's breakpoints, OpenAI's prefix in steps). It took GPT-5.6's
# billed writes for free and its exact breakpoint reads for a prefix: its
# mean there comes from moves it priced too low, which raised the bill so
# far to 1.335x on held-out sessions, and is no mean to hold the ledger to.
ONE_PRICE_LINES = tuple(line.name for line in LINES
                        if line.family.cache not in (NO_CACHE, OPENAI_PREFIX))
# The lines whose cache reads at 0.025x (Fable 5.1): there a cold turn's
# write of the whole history weighs most against the reads masking gave
# up, so cold turns must show there.
LOW_READ = 0.025
LOW_READ_LINES = tuple(line.name for line in LINES
                       if line.family.cache != NO_CACHE and line.family.read == LOW_READ)
OTHER_CACHED_LINES = tuple(name for name in CACHED_LINES if name not in LOW_READ_LINES)
# How far below the mean without cold turns the mean with them must be.
COLD_TURNS_MARGIN = 0.05
# What a target's statistic is, for the JSON output.
STATISTICS = {
    "mean": f"mean over the sessions of the final ratio to {BASELINE!r}",
    "max": f"max over the sessions of the final ratio to {BASELINE!r}",
    "worst_prefix": f"max over the sessions, and over their requests from the "
                    f"{FIRST_JUDGED_REQUEST}th on, of the cost so far over the cost so "
                    f"far of {BASELINE!r}",
}
GROUPS = {ALL: "all sessions of the run (that the line bills)",
          "real": "the real sessions (that the line bills)"}
PAUSED = "the paused sessions of the run, every pause family (that the line bills)"


@dataclass(frozen=True)
class Target:
    """``policy``'s ``statistic`` over ``group`` at most ``threshold`` on
    each of ``lines``; with ``reference``, at most that policy's statistic
    on the same line less ``margin``, judged (with ``reference_bounded``)
    only where the reference itself kept the bill so far within
    ``WORST_PREFIX_BOUND``."""

    name: str
    policy: str
    statistic: str  # a key of STATISTICS
    group: str  # a key of GROUPS
    lines: tuple[str, ...]
    threshold: float
    reference: str | None = None
    margin: float = 0.0
    reference_bounded: bool = True
    over: str = ""  # what the group is, when not GROUPS[group]

    def threshold_text(self) -> str:
        """The threshold in words (a number, or the reference's statistic)."""
        if self.reference is None:
            return f"{self.threshold}"
        less = f" - {self.margin}" if self.margin else ""
        bound = (f", where its bill so far stayed within {WORST_PREFIX_BOUND}x"
                 if self.reference_bounded else "")
        return f"the same statistic of {self.reference!r}{less}{bound}"


# The bound of the bill so far from the first judged request on.
WORST_PREFIX_BOUND = 1.03


TARGETS = (
    Target(f"recommended_bill_so_far_at_most_1.03x_from_request_{FIRST_JUDGED_REQUEST}",
           "recommended", "worst_prefix", ALL, CACHED_LINES, WORST_PREFIX_BOUND),
    Target("recommended_real_mean_not_above_one_price", "recommended", "mean", "real",
           ONE_PRICE_LINES, 0.0, reference=ONE_PRICE_POLICY),
    Target("no_cache_profile_mean_at_most_0.70x_without_cache", "no_cache_profile", "mean",
           ALL, (NO_CACHE_LINE,), 0.70),
)
# Shown beside the targets, not required: the mean the issue aims at under
# 0.1x reads, which these sessions' small results keep just above it.
INFORMATION = (
    Target("recommended_real_mean_at_most_0.80x_under_0.1x_reads", "recommended",
           "mean", "real", MEAN_LINES, 0.80),
    Target("recommended_every_session_at_most_1.05x", "recommended", "max", ALL,
           (*CACHED_LINES, NO_CACHE_LINE), 1.05),
    Target("recommended_real_mean_at_most_0.80x_under_the_other_families", "recommended",
           "mean", "real", OTHER_MEAN_LINES, 0.80),
)


# On the pause families' summary (its group ALL: every paused session).
PAUSE_TARGETS = (
    Target(f"pauses_{PAUSE_POLICY}_bill_so_far_at_most_1.03x_from_request_"
           f"{FIRST_JUDGED_REQUEST}", PAUSE_POLICY, "worst_prefix", ALL, CACHED_LINES,
           WORST_PREFIX_BOUND, over=PAUSED),
    Target(f"pauses_cold_turns_lower_the_mean_by_{COLD_TURNS_MARGIN}x_under_{LOW_READ}x_reads",
           PAUSE_POLICY, "mean", ALL, LOW_READ_LINES, 0.0, reference=NO_COLD_TURNS,
           margin=COLD_TURNS_MARGIN, reference_bounded=False, over=PAUSED),
)
PAUSE_INFORMATION = (
    Target(f"pauses_cold_turns_lower_the_mean_by_{COLD_TURNS_MARGIN}x_under_the_other_families",
           PAUSE_POLICY, "mean", ALL, OTHER_CACHED_LINES, 0.0, reference=NO_COLD_TURNS,
           margin=COLD_TURNS_MARGIN, reference_bounded=False, over=PAUSED),
)


@dataclass
class LineCheck:
    value: float | None  # over the target's group; None: nothing to judge
    passed: bool | None
    by_group: dict[str, float | None]
    session: str | None  # the worst session, for a "max" or "worst_prefix" target
    request: int | None  # and its worst request, for "worst_prefix"
    threshold: float | None = None  # the line's own (a reference's statistic)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"value": self.value, "pass": self.passed,
                                  "by_group": self.by_group}
        if self.threshold is not None:
            out["threshold"] = self.threshold
        if self.session is not None:
            out["session"] = self.session
        if self.request is not None:
            out["request"] = self.request
        return out


@dataclass
class TargetResult:
    target: Target
    checks: dict[str, LineCheck] | None  # None: the policy is not in this run

    @property
    def passed(self) -> bool | None:
        """False if a check failed, None if none could be judged."""
        if self.checks is None:
            return None
        verdicts = [check.passed for check in self.checks.values()]
        if False in verdicts:
            return False
        return True if True in verdicts else None

    def to_json(self) -> dict[str, object]:
        if self.checks is None:
            return {"policy": self.target.policy, "pass": None, "note": NOT_IN_RUN}
        return {"policy": self.target.policy,
                "statistic": STATISTICS[self.target.statistic],
                "over": self.target.over or GROUPS[self.target.group],
                "threshold": self.target.threshold if self.target.reference is None
                else self.target.threshold_text(),
                "pass": self.passed,
                "lines": {line: check.to_json() for line, check in self.checks.items()}}


def _statistic(figures: LineFigures | None, statistic: str) -> float | None:
    if figures is None:
        return None
    if statistic == "worst_prefix":
        return figures["worst_prefix"]
    return figures["max"] if statistic == "max" else figures["mean"]


def _check(summary: Summary, target: Target, line: str) -> LineCheck:
    groups = summary[target.policy]
    by_group = {name: _statistic(group.lines.get(line), target.statistic)
                for name, group in groups.items()}
    figures = groups[target.group].lines.get(line) if target.group in groups else None
    value = by_group.get(target.group)
    session = request = None
    if figures is not None and target.statistic == "max":
        session = figures["max_session"]
    elif figures is not None and target.statistic == "worst_prefix":
        session, request = figures["worst_prefix_session"], figures["worst_prefix_request"]
    threshold: float | None = target.threshold
    if target.reference is not None:
        threshold = _reference(summary, target, line)
        if threshold is not None and target.margin:
            threshold = round(threshold - target.margin, 4)
    passed = value <= threshold + 1e-9 if value is not None and threshold is not None \
        else None
    return LineCheck(value, passed, by_group, session, request, threshold)


def _reference(summary: Summary, target: Target, line: str) -> float | None:
    """The reference policy's statistic on ``line``, where it kept the bill
    so far within the bound (None: not in the run, or not within it)."""
    groups = summary.get(target.reference or "")
    if groups is None or target.group not in groups or ALL not in groups:
        return None
    worst = _statistic(groups[ALL].lines.get(line), "worst_prefix")
    if target.reference_bounded and (worst is None or worst > WORST_PREFIX_BOUND):
        return None
    return _statistic(groups[target.group].lines.get(line), target.statistic)


def evaluate(summary: Summary, targets: Sequence[Target] = TARGETS) -> list[TargetResult]:
    """Each target over its group, with every group's figure beside it, for
    each of its lines (a line no session of the run has is left out)."""
    results = []
    for target in targets:
        if target.policy not in summary:
            results.append(TargetResult(target, None))
            continue
        present = summary[target.policy].get(ALL)
        checks = {line: _check(summary, target, line) for line in target.lines
                  if present is not None and line in present.lines}
        results.append(TargetResult(target, checks))
    return results


PROTOCOL_TARGET = "no_protocol_errors_in_any_policy"
PROTOCOL_STATISTIC = ("forwarded bodies with more than four cache breakpoints, or with a "
                      "client's breakpoint moved or removed, over every session of the run")


@dataclass
class ProtocolResult:
    """The forwarded bodies that break Anthropic's breakpoint rules, per
    policy (kind of error -> requests); none is allowed."""

    by_policy: dict[str, dict[str, int]]

    @property
    def passed(self) -> bool:
        return not any(sum(errors.values()) for errors in self.by_policy.values())

    def to_json(self) -> dict[str, object]:
        return {"statistic": PROTOCOL_STATISTIC, "threshold": 0, "pass": self.passed,
                "policies": self.by_policy}


def evaluate_protocol(summary: Summary) -> ProtocolResult:
    return ProtocolResult({policy: dict(groups[ALL].protocol_errors)
                           for policy, groups in summary.items() if ALL in groups})


def all_pass(results: list[TargetResult], protocol: ProtocolResult | None = None) -> bool:
    """No evaluated target failed (one left out does not count)."""
    return (all(result.passed is not False for result in results)
            and (protocol is None or protocol.passed))


def targets_json(results: list[TargetResult],
                 protocol: ProtocolResult | None = None) -> dict[str, object]:
    out: dict[str, object] = {result.target.name: result.to_json() for result in results}
    if protocol is not None:
        out[PROTOCOL_TARGET] = protocol.to_json()
    out["all_pass"] = all_pass(results, protocol)
    return out
