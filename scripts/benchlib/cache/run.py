"""One run of bench_cache: the policies, the sessions, their replay, the
summary and the targets, in the order the command line asks for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchlib.cache.adversarial import adversarial_sessions
from benchlib.cache.cache_edges import cache_edge_sessions
from benchlib.cache.claude_code import claude_code_sessions
from benchlib.cache.family_figures import FamilySessionFigures
from benchlib.cache.parallel import all_family_figures
from benchlib.cache.pauses import PAUSE_FAMILY_NAMES, pause_sessions
from benchlib.cache.policies import (
    ComparedPolicy,
    compared_policies,
    parse_policy_option,
    pause_policies,
)
from benchlib.cache.summary import Summary, aggregates
from benchlib.cache.synthetic import synthetic_session
from benchlib.cache.targets import (
    INFORMATION,
    PAUSE_INFORMATION,
    PAUSE_TARGETS,
    ProtocolResult,
    TargetResult,
    evaluate,
    evaluate_protocol,
)
from benchlib.errors import BenchError
from obsmask_core.offline.cache.block_tokens import MessageTokens, load_encoder
from obsmask_core.offline.cache.families import FAMILIES, Family, families_of
from obsmask_core.offline.cache.formats import FORMAT_NAMES
from obsmask_core.offline.cache.sessions import Session, load_input, load_real_sessions


@dataclass(frozen=True)
class RunOptions:
    """What the command line chose (see scripts/bench_cache.py)."""

    config: Path
    sessions_folder: Path
    real: bool = True
    formats: tuple[str, ...] = FORMAT_NAMES  # of the real sessions
    synthetic: int = 10
    adversarial: bool = True
    cache_edge: bool = True
    # Claude Code-shaped copies of the real Anthropic sessions: how many
    # (None: all of them).
    claude_code: int | None = None
    families: tuple[Family, ...] = FAMILIES
    # Real sessions of each format: the n shortest (None: all).
    real_limit: int | None = None
    jobs: int = 1  # worker processes for the replay
    inputs: list[Path] = field(default_factory=list)
    policy_options: list[str] = field(default_factory=list)
    # The pause families: copies of the real and Claude Code-shaped
    # sessions with long gaps, under the shipped settings with and without
    # cold turns (benchlib.cache.pauses).
    pauses: bool = True


@dataclass
class PauseRun:
    """The pause families' replay: its own policies (no masking, the
    shipped settings with and without cold turns), sessions, figures,
    summary (a group per pause family, and "all") and targets."""

    policies: dict[str, ComparedPolicy]
    sessions: list[Session]
    figures: list[FamilySessionFigures]  # one per session, in the same order
    summary: Summary
    targets: list[TargetResult]
    protocol: ProtocolResult
    information: list[TargetResult]

    @property
    def requests(self) -> int:
        return sum(len(session.request_ends) for session in self.sessions)


@dataclass
class CacheRun:
    policies: dict[str, ComparedPolicy]
    families: tuple[Family, ...]
    sessions: list[Session]
    figures: list[FamilySessionFigures]  # one per session, in the same order
    summary: Summary
    targets: list[TargetResult]
    protocol: ProtocolResult  # a target too: no protocol error in any policy
    information: list[TargetResult]  # checks shown that are not targets
    pauses: PauseRun | None = None  # None: not in this run

    @property
    def requests(self) -> int:
        return sum(len(session.request_ends) for session in self.sessions)


def choose_policies(options: RunOptions) -> dict[str, ComparedPolicy]:
    """The built-in and settings-file policies, then each ``--policy`` (which
    adds one, or replaces the one of the same name in its place)."""
    compared = compared_policies(options.config)
    for option in options.policy_options:
        name, policy = parse_policy_option(option)
        compared[name] = policy
    return compared


def load_sessions(options: RunOptions) -> list[Session]:
    """Real sessions, their Claude Code-shaped copies (Anthropic), then
    synthetic, adversarial, cache_edge, and those of ``--input`` files;
    only those a family of the run bills."""
    unknown = [name for name in options.formats if name not in FORMAT_NAMES]
    if unknown:
        raise BenchError(f"--formats: unknown {', '.join(unknown)} "
                         f"(known: {', '.join(FORMAT_NAMES)})")
    sessions = (load_real_sessions(options.sessions_folder, options.formats)
                if options.real and options.formats else [])
    if options.real_limit is not None:
        # The shortest of each format (fewest requests, then by name).
        sessions = [session for fmt in options.formats
                    for session in sorted((s for s in sessions if s.fmt.name == fmt),
                                          key=lambda s: (len(s.request_ends), s.name))[
                        :options.real_limit]]
    if options.claude_code is None or options.claude_code > 0:
        sessions += claude_code_sessions(sessions, options.claude_code)
    sessions += [synthetic_session(number) for number in range(options.synthetic)]
    if options.adversarial:
        sessions += adversarial_sessions()
    if options.cache_edge:
        sessions += cache_edge_sessions()
    for path in options.inputs:
        sessions += load_input(path)
    sessions = [session for session in sessions
                if families_of(session.fmt.name, options.families)]
    if not sessions:
        raise BenchError("no session to replay under the families chosen")
    return sessions


def run_cache_benchmark(options: RunOptions) -> CacheRun:
    compared = choose_policies(options)
    policies = {name: choice.policy for name, choice in compared.items()}
    sessions = load_sessions(options)
    paused = pause_sessions(sessions) if options.pauses else []
    paused_compared = pause_policies(compared)
    paused_policies = {name: choice.policy for name, choice in paused_compared.items()}
    tokens = MessageTokens(load_encoder())
    # One pool for both, so that the paused sessions fill the time the
    # others leave.
    every = all_family_figures(
        sessions + paused, policies, tokens, options.jobs, options.families,
        policies_of=lambda session: paused_policies if session.kind in PAUSE_FAMILY_NAMES
        else policies)
    figures, paused_figures = every[:len(sessions)], every[len(sessions):]
    summary = aggregates(figures, list(policies))
    pauses = None
    if paused:
        paused_summary = aggregates(paused_figures, list(paused_policies),
                                    kinds=PAUSE_FAMILY_NAMES)
        pauses = PauseRun(paused_compared, paused, paused_figures, paused_summary,
                          evaluate(paused_summary, PAUSE_TARGETS),
                          evaluate_protocol(paused_summary),
                          evaluate(paused_summary, PAUSE_INFORMATION))
    return CacheRun(compared, options.families, sessions, figures, summary, evaluate(summary),
                    evaluate_protocol(summary), evaluate(summary, INFORMATION), pauses)
