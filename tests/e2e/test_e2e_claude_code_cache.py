"""End to end: the real Claude Code program against the caching Anthropic stub
(tests/support/caching_provider.py: Anthropic's prompt cache as documented,
breakpoints, 20-block lookback, lifetimes, and the prices and minimum of the
request's model from the stub's own model table), directly and through a
real mitmdump with obsmask billing under that cache and adding the frontier
breakpoint.

The task is the one of test_e2e_claude_code.py: ten turns each calling
Claude Code's ``Bash`` tool, most with outputs of several KB (``seq``,
``cat``, ``sort``, ``nl`` of a file in the working directory), one small
(``wc -l``), one failing, then a final text. It runs twice in the same
fresh folder (the working directory's path is in the prompt), each time
with a fresh cache: directly against the stub, then through ``mitmdump
--mode reverse:STUB`` with the shipped mitm.toml (``price_model = "auto"``:
each request priced by its model's row of obsmask's table) and
``window_turns=1``, ``allowance_percent=2``, ``min_free_percent=0`` and
``frontier_breakpoint=true``. With three models, each billed by the stub at
its own documented terms: Claude Code's default (``claude-opus-5-5``: reads
0.05, minimum 512), ``claude-sonnet-4-5`` (reads 0.1, minimum 1,024; its
tool results carry reminders, the tokens left among them) and
``claude-fable-5-1`` (reads 0.025, minimum 512: a warm token costs 50 times
less than writing it again). Claude Code uses three breakpoints of its own:
two system blocks and the last block of its request.

The conversation's requests are those the stub served as the task's (the
prompt's marker in the first user message, the ``Bash`` tool offered);
Claude Code, with no non-essential traffic, sends nothing else, and the
checks of the bill cover every ``/v1/messages`` flow obsmask billed,
whatever it was. Checked:

- every flow obsmask billed (all the conversation's) carries
  ``bill.cache == "breakpoints"``, names a row of obsmask's table that knows
  the model (``bill.model_row``), and a prediction equal to what the stub
  reported for it: ``cache_read_tokens`` its ``cache_read_input_tokens``,
  ``cache_write_tokens`` its ``cache_creation_input_tokens``, and
  ``input_tokens`` its whole input (plain + read + written);
- the run through obsmask costs, in the stub's bill at the model's prices
  (reads 0.05, 0.1 or 0.025, writes 1.25, plain 1.0), at most what the same
  run costs directly, with results masked;
- the frontier breakpoint went out at least once, each time on the block
  the flow's metadata names (the last block of an assistant message, with a
  copy of Claude Code's own ``cache_control``); no request ever had a fifth
  breakpoint (the stub refused none); and Claude Code's own breakpoints
  reached the stub as it sent them (the flow's backup): same places, same
  objects.

The figures (per request: predicted and reported, the breakpoint added;
both bills) are printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from mitmproxy import http

from support.caching_provider import AnthropicBill, AnthropicPromptCache
from support.claude_code import ClaudeRun, claude_executable, prepare_folder, run_claude
from support.flow_files import original_content, read_flows
from support.json_values import as_list, as_object
from support.processes import REPO, recording_arguments, running_mitmdump, wait_for_lines
from support.scripted_anthropic import Served, scripted_anthropic

pytestmark = pytest.mark.e2e

Json = dict[str, object]
JsonPath = tuple[str | int, ...]

PROMPT_MARKER = "OBSMASK-E2E-CACHE-TASK"
PROMPT = f"{PROMPT_MARKER}: run the shell steps the model gives you, then report."
BIG_FILE = "big_file.txt"
BIG_TEXT = "".join(
    f"line {i:03d}: the quick brown fox jumps over the lazy dog\n" for i in range(300)
)
COMMANDS = [
    "seq 1 3000",
    f"cat {BIG_FILE}",
    "cat missing_file.txt",
    "seq 3001 6000",
    f"wc -l {BIG_FILE}",
    f"sort -r {BIG_FILE}",
    "seq 6001 9000",
    f"nl {BIG_FILE}",
    "seq 9001 12000",
    f"grep -n fox {BIG_FILE}",
]
FINAL = "Scripted cached task done: 10 shell commands run, one failed."
CLAUDE_ARGUMENTS = ["--allowedTools", "Bash", "--max-turns", str(len(COMMANDS) + 3)]
# Claude Code's default model (none named: claude-opus-5-5 in the pinned
# version), one whose requests differ (test_e2e_claude_code.py): each tool
# result followed by reminders, among them the tokens left, which Claude Code
# computes from the usage reported; and Fable 5.1, the cheapest reads.
MODELS = ["default", "claude-sonnet-4-5", "claude-fable-5-1"]
# The stub's row for each (its own table, not obsmask's): read price, minimum.
STUB_TERMS = {"default": (0.05, 512), "claude-sonnet-4-5": (0.1, 1024),
              "claude-fable-5-1": (0.025, 512)}
# The shipped settings (mitm.toml: price_model "auto"), the frontier
# breakpoint on, and every move allowed that the ledger allows (no payback
# threshold).
SETTINGS = {
    "window_turns": "1",
    "allowance_percent": "2",
    "min_free_percent": "0",
    "frontier_breakpoint": "true",
}
MAX_BREAKPOINTS = 4


@dataclass
class Session:
    """One run of the task: Claude Code's, what the stub served and billed,
    and (through the proxy) mitmdump's flows and output."""

    model: str
    run: ClaudeRun
    served: list[Served]
    cache: AnthropicPromptCache
    flows: list[http.HTTPFlow]
    log: str


@dataclass(frozen=True)
class Request:
    """One ``/v1/messages`` flow through the proxy and what the stub made of it."""

    number: int  # in the order the stub served them
    flow: http.HTTPFlow
    served: Served

    @property
    def summary(self) -> Json:
        return as_object(self.flow.metadata.get("obsmask", {}))

    @property
    def stub_bill(self) -> AnthropicBill:
        assert self.served.bill is not None, f"request {self.number}: the stub billed nothing"
        return self.served.bill

    def sent(self) -> Json:
        """The body Claude Code sent (the flow's backup, if obsmask changed it)."""
        return as_object(json.loads(original_content(self.flow)))

    def received(self) -> Json:
        """The body the stub received."""
        return as_object(json.loads(self.served.recorded.body))


# Running the task -----------------------------------------------------------------------


def _run_task(root: Path, base_url: str, model: str) -> ClaudeRun:
    work = prepare_folder(root)
    (work / BIG_FILE).write_text(BIG_TEXT, encoding="utf-8")
    arguments = [*CLAUDE_ARGUMENTS, *([] if model == "default" else ["--model", model])]
    return run_claude(root, base_url, PROMPT, arguments)


@pytest.fixture(scope="module", params=MODELS)
def sessions(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Session, Session]:
    """The task run directly, then through mitmdump with obsmask, in the same
    folder (moved aside after the first run), each against a fresh cache,
    with one model."""
    claude_executable()  # skips, saying why, when Claude Code is not installed
    model = str(request.param)
    base = tmp_path_factory.mktemp(f"claude_code_cache_{model}")
    root = base / "agent"

    cache = AnthropicPromptCache()
    with scripted_anthropic(PROMPT_MARKER, COMMANDS, FINAL, cache=cache) as server:
        run = _run_task(root, server.url, model)
        direct = Session(model, run, list(server.served), cache, [], "")
    root.rename(base / "direct")

    config = base / "mitm.toml"
    shutil.copyfile(REPO / "mitm.toml", config)  # the shipped settings; --set wins
    flows_file = base / "flows.mitm"
    cache = AnthropicPromptCache()
    with scripted_anthropic(PROMPT_MARKER, COMMANDS, FINAL, cache=cache) as server:
        arguments = recording_arguments(server.url, config, flows_file, SETTINGS)
        with running_mitmdump(arguments, REPO, base / "confdir") as proxy:
            proxy.wait_for(r"conversation masking on: window 1 tool turns")
            run = _run_task(root, f"http://127.0.0.1:{proxy.port}", model)
            # Every answer has ended; let mitmdump log each usage report.
            wait_for_lines(proxy, r"obsmask: provider reported", len(server.served), 10.0)
        proxied = Session(model, run, list(server.served), cache, read_flows(flows_file),
                          proxy.output())
    return direct, proxied


def _requests(session: Session) -> list[Request]:
    """Every ``/v1/messages`` flow, with what the stub served for it (by the
    answer's ``request-id``), in the order the stub served them."""
    by_id = {served.request_id: (number, served) for number, served in enumerate(session.served)}
    out = []
    for flow in session.flows:
        if urlsplit(flow.request.path).path != "/v1/messages":
            continue
        assert flow.response is not None, f"{flow.request.path}: no answer"
        number, served = by_id[str(flow.response.headers.get("request-id"))]
        out.append(Request(number, flow, served))
    return sorted(out, key=lambda r: r.number)


def _breakpoints(body: Json) -> dict[JsonPath, object]:
    """Every ``cache_control`` of a body: the path of the object holding it -> its value."""
    found: dict[JsonPath, object] = {}

    def walk(value: object, path: JsonPath) -> None:
        if isinstance(value, dict):
            if "cache_control" in value:
                found[path] = value["cache_control"]
            for key, inner in value.items():
                if key != "cache_control":
                    walk(inner, (*path, key))
        elif isinstance(value, list):
            for number, inner in enumerate(value):
                walk(inner, (*path, number))

    walk(body, ())
    return found


def _figures(bill: AnthropicBill) -> dict[str, int]:
    """What the stub reported, in the shape of the ledger's prediction."""
    return {
        "input_tokens": bill.total_tokens,
        "cache_read_tokens": bill.cache_read_input_tokens,
        "cache_write_tokens": bill.cache_creation_input_tokens,
    }


def _row(figures: object) -> str:
    f = as_object(figures)
    return (f"read {f['cache_read_tokens']:>6,} write {f['cache_write_tokens']:>6,} "
            f"input {f['input_tokens']:>6,}")


# The tests ------------------------------------------------------------------------------


def test_claude_code_finishes_the_task_against_the_caching_stub_directly_and_through_obsmask(
    sessions: tuple[Session, Session],
) -> None:
    """The premise of the others: both runs did the whole task, and the stub
    served nothing but the task's requests, all billed by its cache at the
    terms of the model asked for."""
    for session in sessions:
        for served in session.served:
            assert served.bill is not None
            terms = served.bill.terms
            assert (terms.read, terms.minimum) == STUB_TERMS[session.model], terms
        run = session.run
        assert run.returncode == 0, run.describe()
        assert run.outside == (), "Claude Code tried to reach another host than 127.0.0.1"
        report = run.result()
        assert report["is_error"] is False and report["result"] == FINAL, run.describe()
        assert [s.kind for s in session.served] == ["task"] * (len(COMMANDS) + 1)
        assert [s.step for s in session.served] == list(range(len(COMMANDS) + 1))
        assert [s.bill for s in session.served] == session.cache.bills
    _, proxied = sessions
    assert len(_requests(proxied)) == len(proxied.served)


def test_every_request_obsmask_billed_reads_and_writes_what_the_ledger_predicted(
    sessions: tuple[Session, Session],
) -> None:
    """The stub's cache_read_input_tokens, cache_creation_input_tokens and
    whole input equal the ledger's ``predicted`` in the flow's metadata, on
    every flow obsmask billed, priced under a row of obsmask's table that
    knows the model; and it billed every request of the task."""
    _, proxied = sessions
    requests = _requests(proxied)
    lines = ["request: action, masked results, frontier breakpoint, cache | predicted | stub"]
    differences = []
    billed = 0
    for request in requests:
        summary = request.summary
        reported = _figures(request.stub_bill)
        if "bill" not in summary:
            assert request.served.kind != "task", (
                f"request {request.number}: obsmask did not bill a request of the task "
                f"({summary.get('action')}: {summary.get('reason')})")
            continue
        billed += 1
        bill = as_object(summary["bill"])
        row = as_object(bill["model_row"])
        assert row["known"] is True and row["read"] == STUB_TERMS[proxied.model][0], row
        predicted = as_object(bill["predicted"])
        added = summary.get("frontier_breakpoint")
        where = "-" if added is None else \
            f"m{as_object(added)['message']}.b{as_object(added)['block']}"
        lines.append(f"  {request.number:2d}: {summary.get('action')!s:9} "
                     f"{summary.get('masked_tool_results', 0)!s:>2} {where:7} "
                     f"{bill['cache']!s:11} | {_row(predicted)} | {_row(reported)}")
        if bill["cache"] != "breakpoints":
            differences.append(f"request {request.number}: billed under the cache "
                               f"{bill['cache']!r}, not Anthropic's breakpoints")
        if predicted != reported:
            differences.append(f"request {request.number}: predicted {predicted}, "
                               f"stub reported {reported}")
        # The flow carries the stub's usage as obsmask read it.
        assert as_object(summary["provider_usage"])["cached_input_tokens"] == \
            request.stub_bill.cache_read_input_tokens, f"request {request.number}"
    print("\n" + "\n".join(lines))
    assert billed == len(COMMANDS) + 1
    assert differences == [], "\n".join(differences)


def test_claude_code_bills_no_more_through_obsmask_than_directly_and_obsmask_masked(
    sessions: tuple[Session, Session],
) -> None:
    """The stub's bill of the run through obsmask, at the model's prices
    (reads 0.05, 0.1 or 0.025, writes 1.25, plain 1.0), is at most the
    direct run's; results were masked, so the bills differ for a reason."""
    direct, proxied = sessions
    masked = [r.summary.get("masked_tool_results", 0) for r in _requests(proxied)]
    through, straight = proxied.cache.total_units(), direct.cache.total_units()
    print(f"\n{proxied.model}: stub's bill in input-price units: direct {straight:,.1f}, "
          f"through obsmask {through:,.1f} ({through / straight:.3f}x); "
          f"results masked per request: {' '.join(map(str, masked))}")
    for number, (d, p) in enumerate(zip(direct.served, proxied.served, strict=True)):
        assert d.bill is not None and p.bill is not None
        print(f"  {number:2d}: direct {_row(_figures(d.bill))} = {d.bill.units:>8,.1f} | "
              f"through obsmask {_row(_figures(p.bill))} = {p.bill.units:>8,.1f}")
    assert any(isinstance(n, int) and n > 0 for n in masked), "obsmask masked nothing"
    assert through <= straight


def test_the_frontier_breakpoint_closes_an_assistant_message_and_the_clients_stay_as_sent(
    sessions: tuple[Session, Session],
) -> None:
    """Where obsmask added the frontier breakpoint, the stub saw it on the
    block the metadata names, the last block of an assistant message, with a
    copy of Claude Code's last cache_control; it saw Claude Code's own
    breakpoints where and as Claude Code sent them, and never more than 4."""
    _, proxied = sessions
    assert all(s.kind != "invalid" for s in proxied.served), "the stub refused a request"
    added_at = []
    for request in _requests(proxied):
        where = f"request {request.number}"
        assert request.flow.response is not None
        assert request.flow.response.status_code == 200, where
        assert len(request.stub_bill.breakpoints) <= MAX_BREAKPOINTS, where
        sent, received = request.sent(), request.received()
        clients, seen = _breakpoints(sent), _breakpoints(received)
        added = request.summary.get("frontier_breakpoint")
        if added is None:
            assert seen == clients, where
            continue
        added = as_object(added)
        message, block = int(str(added["message"])), int(str(added["block"]))
        path: JsonPath = ("messages", message, "content", block)
        content = as_list(as_object(as_list(received["messages"])[message])["content"])
        assert as_object(as_list(received["messages"])[message])["role"] == "assistant", where
        assert block == len(content) - 1, where
        assert path not in clients, f"{where}: the block had Claude Code's own breakpoint"
        # Claude Code marks the end of its request: its last breakpoint, copied.
        last_message = len(as_list(sent["messages"])) - 1
        [client_control] = [v for p, v in clients.items() if p[:2] == ("messages", last_message)]
        assert added["cache_control"] == client_control, where
        assert seen == {**clients, path: client_control}, where
        assert path in {b.path for b in request.stub_bill.breakpoints}, where
        added_at.append((request.number, message, block))
    print(f"\nfrontier breakpoint (request, message, block): {added_at}")
    assert added_at, "obsmask never added the frontier breakpoint"
