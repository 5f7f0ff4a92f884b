"""End to end: the real mini-swe-agent program, a real mitmdump with obsmask,
a scripted model.

mini-swe-agent 2.4.6 (``mini``, its default ``mini.yaml``: one ``bash`` tool
called through Chat Completions tool calls, litellm as the client; see
support/mini_swe_agent.py for how it is run, cut off from the network) works
on a task in a folder of its own. Its model is a scripted server
(support/scripted_chat.py): 13 commands with large outputs (``seq``,
``cat``, ``grep``... on files the test wrote), one of which fails with exit
code 1 (``cat data.txt missing_file.txt``: the data, then "No such file or
directory"), then ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` with a
checksum as the submission: 14 requests.

The same task runs twice: straight to the server, then through mitmdump with
obsmask in reverse-proxy mode (window of 2 tool turns, the frontier moved on
every turn: ``min_free_percent=0``). Then:

- the agent ends the same way both times: exit code 0, ``exit_status``
  "Submitted", the same submission, the same commands run with the same exit
  codes;
- the server received, through obsmask, the direct run's bodies with the
  old tool results replaced by the placeholder and every other byte the
  agent's (the direct run's body is what the agent sends: its answers are the
  same both times);
- the failed command's result, ``{"returncode": 1, ...}``, is never masked
  (keep_errors reads mini-swe-agent's JSON exit code), and the flows say so;
- every flow carries the usage the server reported.

mini-swe-agent never streams; the "stream" runs load a model class of
mini-swe-agent's own ``LitellmModel`` that asks litellm for a stream
(``stream: true``, ``stream_options.include_usage``) and reads it
(support/mini_streaming_model.py), so that the streamed answers' usage is
checked on a real client too.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mitmproxy import http, io

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import CHAT
from support.chat_masking import check_chat_invariants
from support.mini_swe_agent import (
    MiniRun,
    litellm_needs_mcp_bypass,
    mini_executable,
    network_trap,
    prepare_folder,
    run_mini,
)
from support.processes import running_mitmdump
from support.scripted_chat import SentAnswer, Step, scripted_chat_server

pytestmark = pytest.mark.e2e

WINDOW_TURNS = 2
POLICY = MaskPolicy(window_turns=WINDOW_TURNS, min_free_percent=0)
PLACEHOLDER = "[Observation masquée: "
TASK = (
    "Look through data.txt and app.log, then submit the first 16 characters "
    "of the SHA-256 of data.txt."
)
FAILING_COMMAND = "cat data.txt missing_file.txt"
SUBMIT_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && sha256sum data.txt | cut -c1-16"
STEPS = [
    Step("A baseline first: the numbers the report counts.", "seq 1 3000"),
    Step("Now the data file itself.", "cat data.txt"),
    Step("Which records came in late?", "grep -n 'status=late' data.txt"),
    Step("The archived copy should follow the data.", FAILING_COMMAND),
    Step("The records, last first.", "sort -r data.txt | head -n 400"),
    Step("The worker log.", "cat app.log"),
    Step("The middle of the log, numbered.", "nl -ba app.log | sed -n '200,600p'"),
    Step("Sensor and value columns only.", "cut -d' ' -f3,4 data.txt"),
    Step("The last records.", "tail -n 500 data.txt"),
    Step("Counting down for the histogram.", "seq 4000 -1 1500"),
    Step("The batches of worker-3.", "grep -n 'worker-3 ' app.log"),
    Step("Values above 900.", "awk -F'value=' '$2+0 > 900' data.txt"),
    Step("Line counts, and the head of the log.", "wc -l data.txt app.log && head -c 6000 app.log"),
    Step("Everything is read; submitting the checksum.", SUBMIT_COMMAND),
]
FAILING_TURN = next(n for n, step in enumerate(STEPS) if step.command == FAILING_COMMAND)
REQUESTS = len(STEPS)
# Seconds, for each run of the agent: on a busy 2-core machine (CI runs a
# worker more than it has cores) its start alone, importing litellm, has
# taken over 40 s.
AGENT_BOUND = 180.0
MASKED_LINE = re.compile(r"obsmask: POST /v1/chat/completions: masked (\d+) of (\d+) tool results")


def work_files() -> dict[str, str]:
    data = "".join(
        f"record {i:04d}: sensor={i * 7 % 97:02d} value={i * 37 % 1000:03d} "
        f"status={'late' if i % 11 == 0 else 'ok'}\n"
        for i in range(1500)
    )
    log = "".join(
        f"2024-05-01T12:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{i % 5} "
        f"processed batch {i} in {i % 17 + 3} ms\n"
        for i in range(900)
    )
    return {"data.txt": data, "app.log": log}


# The two runs --------------------------------------------------------------


@dataclass
class Session:
    """One task run twice, straight and through obsmask."""

    mode: str
    direct: MiniRun
    direct_bodies: list[bytes]
    direct_sent: list[SentAnswer]
    proxied: MiniRun
    proxied_bodies: list[bytes]
    proxied_sent: list[SentAnswer]
    flows: list[http.HTTPFlow]
    proxy_output: str
    trap_attempts: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def _flows(path: Path) -> list[http.HTTPFlow]:
    with open(path, "rb") as file:
        return [f for f in io.FlowReader(file).stream() if isinstance(f, http.HTTPFlow)]


def _wait_for_lines(proxy_lines: list[str], pattern: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while sum(1 for line in list(proxy_lines) if pattern in line) < count:
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


@pytest.fixture(scope="module", params=["json", "stream"])
def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Session:
    mode = request.param
    executable = mini_executable()
    stream = mode == "stream"
    tmp = tmp_path_factory.mktemp(f"mini-{mode}")
    config = tmp / "obsmask.toml"
    config.write_text("")  # the repository's mitm.toml must not count
    flow_file = tmp / "flows.mitm"
    started = time.monotonic()
    with network_trap() as trap:
        with scripted_chat_server(STEPS) as server:
            prepare_folder(tmp / "direct", work_files())
            direct = run_mini(executable, tmp / "direct", f"{server.url}/v1", TASK, trap,
                              stream=stream, timeout=AGENT_BOUND)
            direct_bodies, direct_sent = server.bodies(), list(server.script.sent)
        direct_seconds = time.monotonic() - started
        with scripted_chat_server(STEPS) as server:
            arguments = [
                "--mode", f"reverse:{server.url}",
                "--set", f"obsmask_config={config}",
                "--set", f"obsmask_window_turns={WINDOW_TURNS}",
                "--set", "obsmask_min_free_percent=0",
                "-w", str(flow_file),
            ]
            with running_mitmdump(arguments, tmp, tmp / "confdir") as proxy:
                proxy.wait_for(rf"conversation masking on: window {WINDOW_TURNS} tool turns")
                prepare_folder(tmp / "proxied", work_files())
                proxied = run_mini(executable, tmp / "proxied",
                                   f"http://127.0.0.1:{proxy.port}/v1", TASK, trap,
                                   stream=stream, timeout=AGENT_BOUND)
                # The last flow's usage line may follow the agent's exit.
                _wait_for_lines(proxy.lines, "obsmask: provider reported", REQUESTS, 10.0)
            proxied_bodies, proxied_sent = server.bodies(), list(server.script.sent)
            proxy_output = proxy.output()
        attempts = list(trap.attempts)
    return Session(
        mode, direct, direct_bodies, direct_sent, proxied, proxied_bodies, proxied_sent,
        _flows(flow_file), proxy_output, attempts,
        {"direct": direct_seconds, "all": time.monotonic() - started,
         "direct_agent": direct.seconds, "proxied_agent": proxied.seconds},
    )


# Helpers -------------------------------------------------------------------


def _messages(body: bytes) -> list[dict[str, object]]:
    parsed = json.loads(body)
    assert isinstance(parsed, dict) and isinstance(parsed["messages"], list)
    return parsed["messages"]


def _masked_pairs(before: list[object], after: list[object]) -> list[tuple[str, str]]:
    pairs = []
    for old, new in zip(before, after, strict=True):
        assert isinstance(old, dict) and isinstance(new, dict)
        if old["content"] != new["content"]:
            pairs.append((old["content"], new["content"]))
    return pairs


def _spliced(text: str, pairs: list[tuple[str, str]], ascii_only: bool) -> str:
    """``text`` with each JSON-encoded original replaced by its encoded placeholder."""
    for original, placeholder in pairs:
        for ascii_original in (True, False):
            encoded = json.dumps(original, ensure_ascii=ascii_original)
            if encoded in text:
                break
        assert text.count(encoded) == 1, "every tool result is unique in the body"
        text = text.replace(encoded, json.dumps(placeholder, ensure_ascii=ascii_only))
    return text


def _turns_of_results(messages: list[dict[str, object]]) -> dict[int, int]:
    """Position of each tool result -> number of the tool turn that called it."""
    turn_of_call: dict[object, int] = {}
    turns = 0
    out = {}
    for position, message in enumerate(messages):
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, list) and calls:
            for call in calls:
                turn_of_call[call["id"]] = turns
            turns += 1
        elif message.get("role") == "tool":
            out[position] = turn_of_call[message["tool_call_id"]]
    return out


def _chat_flows(session: Session) -> list[http.HTTPFlow]:
    return [f for f in session.flows if f.request.path.endswith("/chat/completions")]


# The tests -----------------------------------------------------------------


def test_the_agent_ends_the_same_way_with_and_without_obsmask(session: Session) -> None:
    for run in (session.direct, session.proxied):
        assert run.returncode == 0, run.describe()
        assert run.info["exit_status"] == "Submitted", run.describe()
        assert run.seconds < AGENT_BOUND
    expected_submission = session.direct.info["submission"]
    assert isinstance(expected_submission, str)
    assert re.fullmatch(r"[0-9a-f]{16}\n", expected_submission)
    assert session.proxied.info["submission"] == expected_submission
    commands = [step.command for step in STEPS]
    assert session.direct.commands() == commands
    assert session.proxied.commands() == commands
    # Every command ran (the submit one ends the run before its result is
    # recorded: mini-swe-agent pads it with -1); the failed one exited 1.
    codes = [0] * len(STEPS)
    codes[FAILING_TURN] = 1
    codes[-1] = -1
    assert session.direct.returncodes() == codes
    assert session.proxied.returncodes() == codes
    assert len(session.direct_bodies) == len(session.proxied_bodies) == REQUESTS
    assert session.trap_attempts == [], "the agent tried to reach the network"


def test_what_mini_swe_agent_sends(session: Session) -> None:
    """The shape obsmask has to read: a Chat Completions request with the
    ``bash`` tool, the results as role "tool" messages holding
    mini-swe-agent's JSON, and, in the stream runs, a request for a stream
    with the usage."""
    first, last = json.loads(session.direct_bodies[0]), json.loads(session.direct_bodies[-1])
    assert [t["function"]["name"] for t in last["tools"]] == ["bash"]
    assert last["model"] == "scripted-model"
    stream = session.mode == "stream"
    for body in session.direct_bodies:
        parsed = json.loads(body)
        assert bool(parsed.get("stream")) is stream
        if stream:
            assert parsed["stream_options"] == {"include_usage": True}
        assert b"_skip_mcp_handler" not in body, "litellm's switch must not reach the wire"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    roles = [m["role"] for m in last["messages"]]
    assert roles == ["system", "user"] + ["assistant", "tool"] * (REQUESTS - 1)
    tool_results = [m for m in last["messages"] if m["role"] == "tool"]
    failing = json.loads(tool_results[FAILING_TURN]["content"])
    assert failing["returncode"] == 1
    assert "missing_file.txt: No such file or directory" in (
        failing.get("output") or failing["output_tail"]
    )
    assert all(len(m["content"]) > 1000 for m in tool_results), "every output is large"
    # The answers reached the agent as the server wrote them: the calls'
    # ids are the script's.
    ids = [m["tool_call_id"] for m in tool_results]
    assert ids == [f"call_scripted{n:02d}" for n in range(REQUESTS - 1)]


def test_the_server_receives_the_agents_bodies_with_old_results_masked(session: Session) -> None:
    masked_requests = 0
    for number, (direct, received) in enumerate(
        zip(session.direct_bodies, session.proxied_bodies, strict=True)
    ):
        sent = json.loads(direct)
        expected_messages = mask_items(sent["messages"], POLICY, CHAT)
        assert check_chat_invariants(sent["messages"], expected_messages) == []
        assert json.loads(received) == {**sent, "messages": expected_messages}, f"request {number}"
        pairs = _masked_pairs(sent["messages"], expected_messages)
        text = direct.decode("utf-8")
        assert received.decode("utf-8") in {
            _spliced(text, pairs, ascii_only=False),
            _spliced(text, pairs, ascii_only=True),
        }, f"request {number}: a byte other than a masked result changed"
        if not pairs:
            assert received == direct, f"request {number}"
        masked_requests += bool(pairs)

        # The window rule, read without the code under test: in request N
        # (N tool turns), the results of the turns before N - 2 are the
        # placeholder, but the failed command's; the others are intact.
        before, after = sent["messages"], json.loads(received)["messages"]
        for position, turn in _turns_of_results(before).items():
            original, got = before[position]["content"], after[position]["content"]
            if turn >= number - WINDOW_TURNS or turn == FAILING_TURN:
                assert got == original, f"request {number}: result of turn {turn} must stay"
            else:
                assert got.startswith(PLACEHOLDER), f"request {number}: turn {turn}"
                assert f"tool_call_id={before[position]['tool_call_id']}" in got
                assert f"chars={len(original)}" in got
    # Request N holds N tool turns: from N = 3 on, one is outside the window.
    assert masked_requests == REQUESTS - (WINDOW_TURNS + 1)


def test_the_failed_commands_result_is_kept_and_the_flows_say_why(session: Session) -> None:
    flows = _chat_flows(session)
    assert len(flows) == REQUESTS
    for number, (flow, received) in enumerate(zip(flows, session.proxied_bodies, strict=True)):
        assert flow.request.content == received
        summary = flow.metadata["obsmask"]
        outside = number - WINDOW_TURNS  # tool turns outside the window
        if outside <= 0:
            assert summary["action"] == "unchanged", f"request {number}: {summary}"
            continue
        assert summary["action"] == "masked", f"request {number}: {summary}"
        failing_is_old = FAILING_TURN < outside
        assert summary["kept"].get("error", 0) == int(failing_is_old), f"request {number}"
        assert summary["masked_tool_results"] == outside - int(failing_is_old)
        assert summary["tool_results"] == number
        assert summary["window_turns"] == WINDOW_TURNS
        assert summary["body_bytes_after"] == len(received)
        assert summary["body_bytes_before"] == len(session.direct_bodies[number])
    last = json.loads(session.proxied_bodies[-1])["messages"]
    failing = [m for m in last if m.get("tool_call_id") == f"call_scripted{FAILING_TURN:02d}"]
    assert json.loads(failing[0]["content"])["returncode"] == 1


def test_every_flow_carries_the_providers_usage(session: Session) -> None:
    flows = _chat_flows(session)
    assert len(flows) == len(session.proxied_sent) == REQUESTS
    stream = session.mode == "stream"
    for number, (flow, sent) in enumerate(zip(flows, session.proxied_sent, strict=True)):
        assert sent.stream is stream
        assert flow.response is not None
        content_type = flow.response.headers.get("content-type", "")
        assert content_type.startswith("text/event-stream" if stream else "application/json")
        assert sent.usage is not None, "the agent asked for the usage of its streams"
        details = sent.usage["prompt_tokens_details"]
        assert isinstance(details, dict)
        assert flow.metadata["obsmask"]["provider_usage"] == {
            "input_tokens": sent.usage["prompt_tokens"],
            "cached_input_tokens": details["cached_tokens"],
            "output_tokens": sent.usage["completion_tokens"],
        }, f"request {number}"
    reported = session.proxy_output.count("obsmask: provider reported ")
    assert reported == REQUESTS
    for bad in ("Traceback", "internal error", "forwarded unchanged", "passed through"):
        assert bad not in session.proxy_output


def test_figures(session: Session) -> None:
    """The figures of the README, printed (``pytest -s``) and sanity-checked."""
    flows = _chat_flows(session)
    masked = [f for f in flows if f.metadata["obsmask"]["action"] == "masked"]
    last = flows[-1].metadata["obsmask"]
    prompt_direct = sum(int(s.usage["prompt_tokens"]) for s in session.direct_sent if s.usage)
    prompt_proxied = sum(int(s.usage["prompt_tokens"]) for s in session.proxied_sent if s.usage)
    print(
        f"\nmini-swe-agent 2.4.6 ({session.mode}), {REQUESTS} requests, window "
        f"{WINDOW_TURNS}: {len(masked)} requests masked; last request "
        f"{last['body_bytes_before']:,} -> {last['body_bytes_after']:,} bytes "
        f"({last['masked_tool_results']} of {last['tool_results']} results masked, "
        f"tool chars {last['tool_chars_before']:,} -> {last['tool_chars_after']:,}); "
        f"prompt tokens over the run {prompt_direct:,} -> {prompt_proxied:,}; "
        f"seconds: direct agent {session.seconds['direct_agent']:.1f}, proxied agent "
        f"{session.seconds['proxied_agent']:.1f}, both runs {session.seconds['all']:.1f}"
        + (" (litellm's MCP gateway skipped: no mcp package in the agent's venv)"
           if litellm_needs_mcp_bypass(str(mini_executable().with_name("python"))) else "")
    )
    assert last["body_bytes_after"] < last["body_bytes_before"] / 2
    assert prompt_proxied < prompt_direct
    lines = [m for line in session.proxy_output.splitlines() if (m := MASKED_LINE.search(line))]
    assert len(lines) == len(masked)
