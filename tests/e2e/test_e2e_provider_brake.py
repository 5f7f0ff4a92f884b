"""End to end: the provider's word as a brake (issue 41, item 4), through a
real mitmdump, against a caching stub whose cache reads fewer blocks back
than the ledger assumes.

The stub (tests/support/caching_provider.py's Anthropic cache, served by
tests/support/scripted_anthropic.py) reads an entry only within 10 blocks
of a breakpoint, where Anthropic documents about 20 and the ledger counts
20. The real ``anthropic`` SDK (tests/support/anthropic_shell_agent.py, in
the clients' virtual environment) runs one conversation of 25 tool turns
of 3,000-character results after a 40,000-character prompt, a breakpoint
on the last block of every request (as Claude Code does), some answers
streamed. obsmask runs the ledger (price_model "anthropic", allowance 2%,
window 1, min_free 80%, the frontier breakpoint) and moves its frontier in
steps of 5 turns (15 blocks): the ledger reads the entry its previous
breakpoint wrote, 15 blocks back, and allows the move; the stub reads
nothing there and bills the whole prompt again.

Checked, with the brake on: the flow of the first such request says the
brake tripped (and the log says so once), every later request is planned
from the request end after it (its bill's ``braked_from``), its frontier
stays where it was, and the stub then reads what the ledger predicted;
the bill so far (the stub's own, against the same conversation sent
directly to a fresh stub) stays within the allowance plus what one
request's miss cost (the largest surprise a flow reports). With the brake
off, the same run goes past that bound: the test fails without the brake.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from mitmproxy import http

from support.agents import clients_python, needs_clients
from support.anthropic_shell_agent import run_shell_agent
from support.caching_provider import AnthropicPromptCache, Breakpoint
from support.flow_files import read_flows
from support.json_values import as_list, as_object
from support.processes import REPO, running_mitmdump
from support.scripted_anthropic import Served, scripted_anthropic

pytestmark = [pytest.mark.e2e, needs_clients]

Json = dict[str, object]

PROMPT_MARKER = "OBSMASK-E2E-PROVIDER-BRAKE"
PROMPT = f"{PROMPT_MARKER}: run the steps you are given. " + "Keep every log line. " * 1900
FINAL = "Scripted brake run done."
SIZES = (3_000,) * 25
STREAM_TURNS = (3, 6, 13, 20)
# The stub's lookback, in blocks (the ledger's is 20).
STUB_LOOKBACK = 10
ALLOWANCE = 0.02
OPTIONS = ("--set", "obsmask_price_model=anthropic", "--set", "obsmask_allowance_percent=2",
           "--set", "obsmask_window_turns=1", "--set", "obsmask_min_free_percent=80",
           "--set", "obsmask_frontier_breakpoint=true", "--set", "obsmask_batch_turns=5")


class ShortLookbackCache(AnthropicPromptCache):
    """The stub's Anthropic cache, reading only within ``STUB_LOOKBACK``
    blocks of a breakpoint (its ``_read`` with that bound)."""

    def _read(self, marks: Sequence[Breakpoint], keys: Sequence[bytes],
              now: float) -> int | None:
        candidates = {k for mark in marks
                      for k in range(mark.block, max(-1, mark.block - STUB_LOOKBACK), -1)}
        for k in sorted(candidates, reverse=True):
            entry = self._entries.get(keys[k])
            if entry is not None and entry.expires > now:
                entry.expires = max(entry.expires, now + entry.ttl)
                return k
        return None


def _commands() -> list[str]:
    return [f"emit {size} step{number}" for number, size in enumerate(SIZES)]



@dataclass
class Run:
    served: list[Served]
    flows: list[http.HTTPFlow]
    output: str

    def units(self) -> list[float]:
        """The stub's bill of each request, in units of the base input price."""
        return [s.bill.units for s in self.served if s.bill is not None]

    def meta(self, number: int) -> Json:
        return as_object(self.flows[number].metadata["obsmask"])


def _direct() -> list[float]:
    """The conversation sent straight to a fresh stub: each request's bill."""
    cache = ShortLookbackCache()
    with scripted_anthropic(PROMPT_MARKER, _commands(), FINAL, cache=cache) as scripted:
        run_shell_agent(clients_python(), scripted.url, PROMPT, stream_turns=STREAM_TURNS,
                        breakpoint="last")
        return [s.bill.units for s in scripted.task() if s.bill is not None]


def _through_proxy(tmp_path: Path, brake: bool) -> Run:
    cache = ShortLookbackCache()
    flows_file = tmp_path / "flows.mitm"
    config = tmp_path / "obsmask.toml"
    config.write_text("", encoding="utf-8")  # the repository's mitm.toml must not count
    with scripted_anthropic(PROMPT_MARKER, _commands(), FINAL, cache=cache) as scripted:
        arguments = ["--mode", f"reverse:{scripted.url}", "--set", f"obsmask_config={config}",
                     *OPTIONS, "--set", f"obsmask_provider_brake={str(brake).lower()}",
                     "-w", str(flows_file)]
        with running_mitmdump(arguments, REPO, tmp_path / "confdir") as proxy:
            run_shell_agent(clients_python(), f"http://127.0.0.1:{proxy.port}", PROMPT,
                            stream_turns=STREAM_TURNS, breakpoint="last", log=proxy.output)
            output = proxy.output()
        flows = sorted(read_flows(flows_file), key=lambda f: f.request.timestamp_start)
        served = scripted.task()
    assert len(flows) == len(served) == len(SIZES) + 1
    assert "Traceback" not in output and "internal error" not in output, output
    return Run(served, flows, output)


def _predicted_read(run: Run, number: int) -> int:
    predicted = as_object(as_object(run.meta(number)["bill"])["predicted"])
    value = predicted["cache_read_tokens"]
    assert isinstance(value, int)
    return value


def _missed(run: Run) -> list[int]:
    """The requests at which the stub read less than the ledger predicted."""
    return [n for n, s in enumerate(run.served)
            if s.bill is not None and s.bill.cache_read_input_tokens < _predicted_read(run, n)]


def _worst_over(direct: list[float], proxied: list[float]) -> float:
    """How far the bill so far went past the bill without obsmask and the
    allowance, at its worst, in units of the base input price."""
    worst = sent = went = 0.0
    for plain, masked in zip(direct, proxied, strict=True):
        sent, went = sent + plain, went + masked
        worst = max(worst, went - sent * (1 + ALLOWANCE))
    return worst


def _largest_miss(run: Run) -> float:
    """What one request's miss cost: the most the stub billed a request
    beyond what the ledger predicted for it (reads 0.1, writes 1.25, the
    rest 1.0; the stub counts tokens as the ledger estimates them)."""
    misses = [0.0]
    for number, served in enumerate(run.served):
        predicted = as_object(as_object(run.meta(number)["bill"])["predicted"])
        read, written, total = (int(str(predicted[key])) for key in
                                ("cache_read_tokens", "cache_write_tokens", "input_tokens"))
        assert served.bill is not None
        misses.append(served.bill.units - (0.1 * read + 1.25 * written + total - read - written))
    return max(misses)


def test_the_brake_stops_the_frontier_once_the_provider_bills_past_the_allowance(
    tmp_path: Path,
) -> None:
    direct = _direct()
    run = _through_proxy(tmp_path, brake=True)
    assert len(direct) == len(run.units())
    missed = _missed(run)
    # Premise: the stub read less than predicted at a move of the frontier.
    assert missed, "the stub never read less than the ledger predicted"
    first = missed[0]
    tripped = [n for n in range(len(run.flows))
               if as_object(run.meta(n).get("brake", {})).get("tripped") is True]
    assert tripped == [first], (tripped, missed)
    assert run.output.count("provider brake: conversation") == 1, run.output
    trip_bill = as_object(run.meta(first)["bill"])
    braked_from = as_object(run.meta(first)["brake"])["braked_from"]
    assert braked_from == trip_bill["request_items"] + 1  # type: ignore[operator]
    # From the next request on: planned from the brake, the frontier where
    # it stood, and the stub reads what the ledger predicted.
    frontier = run.meta(first)["frontier_turn"]
    for number in range(first + 1, len(run.flows)):
        meta = run.meta(number)
        assert as_object(meta["bill"])["braked_from"] == braked_from, number
        assert meta["frontier_turn"] == frontier, number
        assert as_object(meta["brake"])["braked_from"] == braked_from, number
    assert missed == [first], missed
    # The bill so far: within the allowance plus one request's miss.
    miss = _largest_miss(run)
    assert miss > 0
    worst = _worst_over(direct, run.units())
    print(f"\nbrake on: worst over the allowance {worst:.0f} units, one miss {miss:.0f}, "
          f"bill {sum(run.units()) / sum(direct):.3f}x of direct")
    assert worst <= miss + 1, (worst, miss)
    # The frontier breakpoint stays put: the flows after the trip forward
    # the tripping request's items again, byte for byte.
    tripping = as_list(as_object(json.loads(run.served[first].recorded.body))["messages"])
    for served in run.served[first + 1:]:
        later = as_list(as_object(json.loads(served.recorded.body))["messages"])
        assert later[:len(tripping) - 1] == tripping[:-1]


def test_without_the_brake_the_same_run_goes_past_the_allowance_and_one_miss(
    tmp_path: Path,
) -> None:
    direct = _direct()
    run = _through_proxy(tmp_path, brake=False)
    assert not any("brake" in run.meta(n) for n in range(len(run.flows)))
    assert not any("braked_from" in as_object(run.meta(n)["bill"]) for n in range(len(run.flows)))
    missed = _missed(run)
    assert len(missed) > 1, missed
    miss = _largest_miss(run)
    worst = _worst_over(direct, run.units())
    print(f"\nbrake off: worst over the allowance {worst:.0f} units, one miss {miss:.0f}, "
          f"bill {sum(run.units()) / sum(direct):.3f}x of direct")
    assert worst > miss + 1, (worst, miss)
