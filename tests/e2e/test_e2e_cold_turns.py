"""End to end: cold turns, through a real mitmdump, against a caching stub
whose entries expire by the clock.

A request that comes back after the provider's cache has expired is
billed whole by the provider, masked or not: obsmask masks there everything
its policy would mask without a cache (the frontier catches up with the
window, and what the ledger kept for the cache's sake is masked too).

The stub (tests/support/caching_provider.py's Anthropic cache, served by
tests/support/scripted_anthropic.py) runs its clock 75 times faster than
the wall's, so its 5-minute entries live 4 seconds; obsmask is told the
same lifetime with a margin (``cold_after_seconds = 5``). The real
``anthropic`` SDK (tests/support/anthropic_shell_agent.py, in the clients'
virtual environment) runs one conversation of 14 tool turns of
500-character results (too small for a move to pay on a warm cache) after
a 40,000-character prompt, a breakpoint on the last block of every
request (as Claude Code does); before its 10th request the tool takes 8
seconds (``wait 8``): the cache has expired by then.

Checked, the same run with cold turns on and off: only the request after
the pause is billed cold (its bill's ``cold``), and the stub reads nothing
of it and writes it whole in both runs; with cold turns on it goes out
with more results masked, the later requests keep them masked and the
stub reads them from its cache; and the whole run bills less than with
cold turns off (the test fails without the cold rule).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from mitmproxy import http

from support.agents import clients_python, needs_clients
from support.anthropic_shell_agent import run_shell_agent
from support.caching_provider import AnthropicPromptCache
from support.flow_files import read_flows
from support.json_values import as_object
from support.processes import REPO, running_mitmdump
from support.scripted_anthropic import Served, scripted_anthropic

pytestmark = [pytest.mark.e2e, needs_clients]

Json = dict[str, object]

PROMPT_MARKER = "OBSMASK-E2E-COLD-TURNS"
PROMPT = f"{PROMPT_MARKER}: run the steps you are given. " + "Keep every log line. " * 1900
FINAL = "Scripted cold run done."
# Results too small for a move to pay for itself on a warm cache.
SIZES = (500,) * 14
PAUSED_TURN = 9  # the request after 9 tool turns comes after the pause
PAUSE_SECONDS = 8
# The stub's clock runs this much faster: its 300-second entries live 4 s.
SPEED = 75.0
OPTIONS = ("--set", "obsmask_price_model=anthropic", "--set", "obsmask_allowance_percent=2",
           "--set", "obsmask_window_turns=1", "--set", "obsmask_min_free_percent=80",
           "--set", "obsmask_frontier_breakpoint=true", "--set", "obsmask_cold_after_seconds=5")


def _commands() -> list[str]:
    return [(f"wait {PAUSE_SECONDS} " if number == PAUSED_TURN - 1 else "")
            + f"emit {size} step{number}" for number, size in enumerate(SIZES)]


def _fast_clock() -> float:
    return time.monotonic() * SPEED



@dataclass
class Run:
    served: list[Served]
    flows: list[http.HTTPFlow]

    def units(self) -> float:
        """The stub's bill of the run, in units of the base input price."""
        return sum(s.bill.units for s in self.served if s.bill is not None)

    def meta(self, number: int) -> Json:
        return as_object(self.flows[number].metadata["obsmask"])

    def bill(self, number: int) -> Json:
        return as_object(self.meta(number)["bill"])

    def masked(self, number: int) -> int:
        value = self.meta(number).get("masked_tool_results", 0)
        assert isinstance(value, int)
        return value


def _through_proxy(tmp_path: Path, cold_turns: bool) -> Run:
    cache = AnthropicPromptCache(clock=_fast_clock)
    flows_file = tmp_path / f"flows-{cold_turns}.mitm"
    config = tmp_path / "obsmask.toml"
    config.write_text("", encoding="utf-8")  # the repository's mitm.toml must not count
    with scripted_anthropic(PROMPT_MARKER, _commands(), FINAL, cache=cache) as scripted:
        arguments = ["--mode", f"reverse:{scripted.url}", "--set", f"obsmask_config={config}",
                     *OPTIONS, "--set", f"obsmask_cold_turns={str(cold_turns).lower()}",
                     "-w", str(flows_file)]
        if not cold_turns:  # a lifetime of its own turns the rule on: none here
            arguments[arguments.index("obsmask_cold_after_seconds=5")] = \
                "obsmask_cold_after_seconds=0"
        with running_mitmdump(arguments, REPO, tmp_path / f"confdir-{cold_turns}") as proxy:
            run_shell_agent(clients_python(), f"http://127.0.0.1:{proxy.port}", PROMPT,
                            breakpoint="last", log=proxy.output)
            output = proxy.output()
        flows = sorted(read_flows(flows_file), key=lambda f: f.request.timestamp_start)
        served = scripted.task()
    assert len(flows) == len(served) == len(SIZES) + 1
    assert "Traceback" not in output and "internal error" not in output, output
    return Run(served, flows)


def test_a_request_after_the_caches_lifetime_is_masked_further_and_the_run_bills_less(
    tmp_path: Path,
) -> None:
    cold = _through_proxy(tmp_path, cold_turns=True)
    warm = _through_proxy(tmp_path, cold_turns=False)
    paused = PAUSED_TURN
    # Only the request after the pause is billed cold, and only with the rule on.
    assert [n for n in range(len(cold.flows)) if cold.bill(n)["cold"] is True] == [paused]
    assert not any(warm.bill(n)["cold"] for n in range(len(warm.flows)))
    # The stub wrote it whole either way: its cache had expired.
    for run in (cold, warm):
        stub = run.served[paused].bill
        assert stub is not None
        assert stub.cache_read_input_tokens == 0 and stub.input_tokens == 0, stub
        assert stub.cache_creation_input_tokens == stub.total_tokens, stub
    # Masked further there, and kept so on the warm requests after it,
    # which the stub reads from the cache the cold request wrote.
    assert cold.masked(paused) > warm.masked(paused), (cold.masked(paused),
                                                       warm.masked(paused))
    for number in range(paused + 1, len(cold.flows)):
        assert cold.masked(number) >= cold.masked(paused), number
        stub = cold.served[number].bill
        assert stub is not None and stub.cache_read_input_tokens > 0, (number, stub)
    # The ledger booked the cold request as billed whole, masked and not.
    predicted = as_object(cold.bill(paused)["predicted"])
    assert predicted["cache_read_tokens"] == 0
    print(f"\ncold turns on: {cold.units():,.0f} units, off: {warm.units():,.0f} "
          f"({cold.units() / warm.units():.3f}x); masked at the cold request "
          f"{cold.masked(paused)} vs {warm.masked(paused)}")
    assert cold.units() < warm.units()
