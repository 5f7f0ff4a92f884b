"""End to end: the real Codex CLI (``codex exec``, OpenAI Responses API,
streamed) through a real mitmdump with obsmask, driving a scripted local model.

The scripted server (tests/support/scripted_responses.py) plays the model:
seven turns, each calling Codex's shell tool (``exec_command``, found in the
request's ``tools``) with one command: five whose output is large (``seq``,
``cat`` and ``nl`` of a file written in the agent's working directory), one
small (``wc -l``), one that fails (``cat missing_file.txt``: Codex reports
"Process exited with code 1"); then a final text answer. Codex runs the commands for
real, in a fresh folder, with no network: its only server is the scripted
one (tests/support/codex.py: a fresh ``CODEX_HOME``, a fake API key, the
built-in provider's base URL set by ``-c openai_base_url=...``, no plugin
sync nor analytics, proxies pointing at a trap that records any attempt to
reach another host).

The same task runs twice in the same folder: directly against the server,
then through ``mitmdump --mode reverse:SERVER`` with obsmask (window of 2
tool turns, the built-in defaults otherwise), its flows written with ``-w``.
Checked:

- Codex finishes the same way both times: exit code 0, the same final
  answer, the same commands run with the same outputs; it asks the server
  for nothing but one WebSocket upgrade (refused: HTTP 426, through the proxy
  too) and the task's streamed ``POST /v1/responses``, each with the API
  key it was given, and nothing of any other host;
- what it sent through the proxy (each flow's original request, its backup)
  is what it sent directly, but for what Codex makes anew each run (ids,
  times, the shell's chunk ids and wall times);
- what the server received is that body with the ``output`` of the old
  ``function_call_output`` items replaced by the placeholder, every other
  byte unchanged, exactly as ``mask_items`` (the addon's own model) and the
  window rule recomputed here say: the newest two tool turns whole, the
  failed command's output never masked, the item ids, call items and order
  untouched;
- each ``/v1/responses`` flow carries the usage the server reported in its
  stream, and mitmdump logged every masking and every usage report.

The figures (requests masked, bytes of the last request before and after,
usage per request, run times) are printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from mitmproxy import http, io

from obsmask_core.conversation.masking.apply import mask_items
from obsmask_core.conversation.settings.policy import MaskPolicy
from obsmask_core.conversation.turns.wire_formats import RESPONSES
from obsmask_core.conversation.usage.provider_usage import ProviderUsage
from support.codex import API_KEY, MODEL, CodexRun, codex_executable, prepare_folder, run_codex
from support.flow_files import flows_in_answer_order, original_content
from support.json_values import as_list, as_object, as_str
from support.processes import REPO, running_mitmdump, wait_for_lines
from support.recording_server import keep_bodies
from support.scripted_responses import Served, scripted_responses, shell_tool
from support.splices import compact, splice_problems
from support.sse import sse_events
from support.usage import read as read_usage

pytestmark = pytest.mark.e2e

Json = dict[str, object]

PROMPT_MARKER = "OBSMASK-E2E-TASK"
PROMPT = f"{PROMPT_MARKER}: run the shell steps the model gives you, then report."
BIG_FILE = "big_file.txt"
BIG_TEXT = "".join(
    f"line {i:03d}: the quick brown fox jumps over the lazy dog\n" for i in range(300)
)
FAILING = "cat missing_file.txt"
SMALL = "wc -l big_file.txt"
COMMANDS = [
    "seq 1 3000",
    f"cat {BIG_FILE}",
    FAILING,
    "seq 3001 6000",
    SMALL,
    "seq 6001 9000",
    f"nl {BIG_FILE}",
]
FINAL = "Scripted task done: 7 shell commands run, one failed (missing_file.txt)."
SHELL = "exec_command"
WINDOW_TURNS = 2
POLICY = MaskPolicy(window_turns=WINDOW_TURNS)
PLACEHOLDER = (
    "[Observation masquée: résultat d'outil ancien (tool_call_id={id}, outil=exec_command, "
    "chars={chars})]"
)
# What Codex makes anew in each run, so that two runs of the same task differ
# there only: ids (UUIDs), times, and the header of each shell output (the
# chunk's id, the wall time).
VARIABLE = [
    (re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), b"UUID"),
    (re.compile(rb'"create_time":\d+(?:\.\d+)?'), b'"create_time":0'),
    (re.compile(rb'turn_started_at_unix_ms\\":\d+'), rb'turn_started_at_unix_ms\":0'),
    (re.compile(rb"Chunk ID: [0-9a-f]+"), b"Chunk ID: C"),
    (re.compile(rb"Wall time: [0-9.]+ seconds"), b"Wall time: W seconds"),
]


@dataclass
class Session:
    """One run of the task: Codex's, and what the server saw."""

    run: CodexRun
    served: list[Served]
    task: list[Served]  # the requests of the task's conversation, in order
    flows: list[http.HTTPFlow]  # through the proxy: mitmdump's flows
    log: str


# Reading the bodies ------------------------------------------------------------------


def _body(raw: bytes) -> Json:
    return as_object(json.loads(raw))


def _normalized(raw: bytes) -> bytes:
    for pattern, replacement in VARIABLE:
        raw = pattern.sub(replacement, raw)
    return raw


@dataclass(frozen=True)
class Output:
    """A ``function_call_output`` item of a request, found without the addon's code."""

    position: int  # in ``input``
    call_id: str
    turn: int  # the tool turn that called it
    command: str
    value: object  # the item's ``output``


def _calls(items: list[object]) -> list[tuple[str, str, str]]:
    """(call_id, tool name, command) of every ``function_call``, in order."""
    out = []
    for item in map(as_object, items):
        if item.get("type") == "function_call":
            command = as_object(json.loads(as_str(item["arguments"]))).get("cmd")
            out.append((as_str(item["call_id"]), as_str(item["name"]), str(command)))
    return out


def _outputs(items: list[object]) -> list[Output]:
    calls = _calls(items)
    turns = {call_id: n for n, (call_id, _, _) in enumerate(calls)}
    commands = {call_id: command for call_id, _, command in calls}
    out = []
    for position, item in enumerate(map(as_object, items)):
        if item.get("type") == "function_call_output":
            call_id = as_str(item["call_id"])
            out.append(Output(position, call_id, turns[call_id], commands[call_id],
                              item.get("output")))
    return out


def _output_text(value: object) -> str:
    """The command's output in a ``function_call_output``: its text without
    the header Codex puts before it (chunk id, wall time, exit code...)."""
    _, mark, text = as_str(value).partition("\nOutput:\n")
    assert mark, f"no Output: line in {value!r:.200}"
    return text


def _placeholder(output: Output) -> str:
    return PLACEHOLDER.format(id=output.call_id, chars=len(as_str(output.value)))


def _skeleton(body: Json) -> list[tuple[object, ...]]:
    """What masking must keep of a request's items: their order, types, ids,
    roles, and each call's name and arguments."""
    return [
        (item.get("type"), item.get("id"), item.get("role"), item.get("call_id"),
         item.get("name"), item.get("arguments"))
        for item in map(as_object, as_list(body["input"]))
    ]


# The two runs ------------------------------------------------------------------------


def _run_task(root: Path, base_url: str) -> CodexRun:
    work = prepare_folder(root)
    (work / BIG_FILE).write_text(BIG_TEXT, encoding="utf-8")
    return run_codex(root, base_url, PROMPT)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, Session]:
    """The task run directly, then through mitmdump with obsmask, in the same
    folder (moved aside after the first run)."""
    codex_executable()  # skips, saying why, when Codex is not installed
    base = tmp_path_factory.mktemp("codex")
    root = base / "agent"

    with scripted_responses(PROMPT_MARKER, COMMANDS, FINAL) as server:
        run = _run_task(root, f"{server.url}/v1")
        direct = Session(run, list(server.served), server.task(), [], "")
    root.rename(base / "direct")
    keep_bodies(base / "direct" / "received", direct.served)

    config = base / "obsmask.toml"
    config.write_text("")  # the built-in defaults: the repository's mitm.toml must not count
    flows_file = base / "flows.mitm"
    with scripted_responses(PROMPT_MARKER, COMMANDS, FINAL) as server:
        arguments = [
            "--mode",
            f"reverse:{server.url}",
            "--set",
            f"obsmask_config={config}",
            "--set",
            f"obsmask_window_turns={WINDOW_TURNS}",
            "-w",
            str(flows_file),
        ]
        with running_mitmdump(arguments, REPO, base / "confdir") as proxy:
            proxy.wait_for(rf"conversation masking on: window {WINDOW_TURNS} tool turns")
            run = _run_task(root, f"http://127.0.0.1:{proxy.port}/v1")
            # Every answer has ended; let mitmdump log each usage report.
            wait_for_lines(proxy, r"obsmask: provider reported", len(server.task()), 10.0)
        proxied_served = list(server.served)
        proxied_task = server.task()
        log = proxy.output()
    keep_bodies(root / "received", proxied_served)
    with open(flows_file, "rb") as file:
        flows = [f for f in io.FlowReader(file).stream() if isinstance(f, http.HTTPFlow)]
    return direct, Session(run, proxied_served, proxied_task, flows, log)


def _task_flows(session: Session) -> list[http.HTTPFlow]:
    """The flows of the task's requests, in the order the server answered them."""
    return flows_in_answer_order(session.flows, [served.request_id for served in session.task],
                                 "x-request-id")


# The tests ---------------------------------------------------------------------------


def test_codex_finishes_the_task_the_same_way_directly_and_through_obsmask(
    sessions: tuple[Session, Session],
) -> None:
    for session in sessions:
        run = session.run
        assert run.returncode == 0, run.describe()
        assert run.final_message() == FINAL, run.describe()
        # Every command was run, in order, by Codex's shell tool, through bash.
        assert [c.command for c in run.commands()] == [
            f"/bin/bash -lc '{c}'" for c in COMMANDS
        ], run.describe()
        assert [c.exit_code for c in run.commands()] == [
            1 if c == FAILING else 0 for c in COMMANDS
        ]
        # One request of the task per step, in the script's order, each with
        # the shell tool the server found in it.
        assert [s.step for s in session.task] == list(range(len(COMMANDS) + 1))
        assert all(s.stream for s in session.task), "Codex streams every turn"
        last = _body(session.task[-1].recorded.body)
        assert last["model"] == MODEL
        assert [(name, command) for _, name, command in _calls(as_list(last["input"]))] == [
            (SHELL, c) for c in COMMANDS
        ]
    direct, proxied = sessions
    assert proxied.run.final_message() == direct.run.final_message()
    assert proxied.run.commands() == direct.run.commands()
    outputs = {c.command: c.output for c in direct.run.commands()}
    assert outputs["/bin/bash -lc 'seq 1 3000'"] == "".join(f"{i}\n" for i in range(1, 3001))
    assert outputs[f"/bin/bash -lc 'cat {BIG_FILE}'"] == BIG_TEXT
    assert outputs[f"/bin/bash -lc '{SMALL}'"] == f"300 {BIG_FILE}\n"
    assert outputs[f"/bin/bash -lc '{FAILING}'"] == (
        "cat: missing_file.txt: No such file or directory\n"
    )


def test_codex_asks_the_server_for_nothing_but_one_refused_websocket_and_the_task(
    sessions: tuple[Session, Session],
) -> None:
    """Codex's built-in provider tries the Responses WebSocket transport once,
    is refused (426, through mitmdump too), streams every turn over HTTP, with
    the API key of its environment, and reaches no other host."""
    for session in sessions:
        assert session.run.outside == (), "Codex tried to reach another host than 127.0.0.1"
        kinds = [s.kind for s in session.served]
        assert kinds == ["websocket"] + ["task"] * len(session.task), kinds
        for served in session.served:
            recorded = served.recorded
            assert urlsplit(recorded.path).path == "/v1/responses"
            assert recorded.method == ("GET" if served.kind == "websocket" else "POST")
            assert recorded.headers.get("authorization") == f"Bearer {API_KEY}"
    _, proxied = sessions
    [upgrade] = [f for f in proxied.flows if f.request.method == "GET"]
    assert upgrade.request.headers["upgrade"].lower() == "websocket"
    assert upgrade.response is not None and upgrade.response.status_code == 426


def test_codex_sends_the_same_conversation_through_the_proxy(
    sessions: tuple[Session, Session],
) -> None:
    """What Codex sent through mitmdump (each flow's original request, its
    backup) is what it sent directly, but for what Codex makes anew in each
    run: ids, times, the shell's chunk ids and wall times, and the order of
    the keys of ``client_metadata``."""
    direct, proxied = sessions
    flows = _task_flows(proxied)
    assert len(flows) == len(direct.task) == len(proxied.task)
    for number, (flow, served) in enumerate(zip(flows, direct.task, strict=True)):
        original = original_content(flow)
        # JSON equality, not bytes: Codex writes ``client_metadata`` from a
        # hash map, its keys in another order each run.
        assert json.loads(_normalized(original)) == json.loads(
            _normalized(served.recorded.body)), f"request {number}"


def test_the_server_receives_old_shell_outputs_masked_and_every_other_byte_as_sent(
    sessions: tuple[Session, Session],
) -> None:
    _, proxied = sessions
    flows = _task_flows(proxied)
    masked_counts = []
    for number, (served, flow) in enumerate(zip(proxied.task, flows, strict=True)):
        sent_raw = original_content(flow)
        received_raw = served.recorded.body
        assert flow.request.content == received_raw, "the flow holds what was forwarded"
        sent = _body(sent_raw)
        items = as_list(sent["input"])

        # The addon's model, on what Codex sent through the proxy.
        received = _body(received_raw)
        assert received == {**sent, "input": mask_items(items, POLICY, RESPONSES)}, (
            f"request {number}"
        )
        # Masking replaces values only: no item added, removed or moved, the
        # ids and the call items untouched.
        assert _skeleton(received) == _skeleton(sent), f"request {number}"

        # The window rule, recomputed: the outputs of the last WINDOW_TURNS
        # tool turns, the failed command's, and those not longer than their
        # placeholder arrive whole; every other one is the placeholder.
        received_items = as_list(received["input"])
        outputs = _outputs(items)
        assert [o.turn for o in outputs] == list(range(number))
        replaced = []
        for output in outputs:
            got = as_object(received_items[output.position]).get("output")
            old = output.turn < number - WINDOW_TURNS
            placeholder = _placeholder(output)
            if not old or output.command == FAILING or len(placeholder) >= len(
                as_str(output.value)
            ):
                assert got == output.value, f"request {number}: {output.command} changed"
                continue
            assert got == placeholder, f"request {number}: {output.command}"
            replaced.append((output.value, got))
        assert (
            splice_problems(sent_raw.decode("utf-8"), received_raw.decode("utf-8"), replaced) == []
        ), f"request {number}"
        masked_counts.append(len(replaced))

    # Masking starts once a turn leaves the window; on the last request every
    # old output is masked but the failed command's (and wc -l's, when
    # shorter than its placeholder), whatever its age.
    assert masked_counts[: WINDOW_TURNS + 1] == [0] * (WINDOW_TURNS + 1)
    assert all(masked_counts[WINDOW_TURNS + 1 :])
    old_at_last = len(COMMANDS) - WINDOW_TURNS
    assert COMMANDS.index(FAILING) < old_at_last and COMMANDS.index(SMALL) < old_at_last
    assert masked_counts[-1] >= old_at_last - 2
    last = as_list(_body(proxied.task[-1].recorded.body)["input"])
    [failed] = [o for o in _outputs(last) if o.command == FAILING]
    assert "Process exited with code 1" in as_str(failed.value)
    assert _output_text(failed.value) == "cat: missing_file.txt: No such file or directory\n"
    assert any(
        as_str(o.value).startswith("[Observation masquée: ") for o in _outputs(last)
    )

    # mitmdump said so, request by request.
    logged = [
        (int(m.group(1)), int(m.group(2)))
        for m in re.finditer(
            r"obsmask: POST /v1/responses: masked (\d+) of (\d+) tool results", proxied.log
        )
    ]
    assert logged == [(n, i) for i, n in enumerate(masked_counts) if n]
    assert "Traceback" not in proxied.log
    assert "internal error" not in proxied.log
    assert "forwarded unchanged" not in proxied.log


def _expected_usage(served: Served) -> ProviderUsage:
    usage = as_object(served.usage)
    return ProviderUsage(
        input_tokens=int(str(usage["input_tokens"])),
        cached_input_tokens=int(str(as_object(usage["input_tokens_details"])["cached_tokens"])),
        output_tokens=int(str(usage["output_tokens"])),
    )


def test_every_streamed_flow_carries_the_providers_usage(
    sessions: tuple[Session, Session],
) -> None:
    _, proxied = sessions
    flows = _task_flows(proxied)
    assert len(flows) == len(proxied.task)
    for flow, served in zip(flows, proxied.task, strict=True):
        assert flow.response is not None
        assert flow.response.headers["content-type"].startswith("text/event-stream")
        expected = _expected_usage(served)
        summary = as_object(flow.metadata.get("obsmask"))
        assert summary.get("provider_usage") == expected.as_metadata(), flow.request.path
        assert "provider_usage_problem" not in summary
        assert expected.comment_line() in proxied.log


def test_obsmask_makes_codex_send_fewer_input_tokens(sessions: tuple[Session, Session]) -> None:
    """The last request is smaller through obsmask, and the task costs fewer
    input tokens; the figures (requests masked, the last request's bytes
    before and after, the provider's usage per request, the run times) are
    printed."""
    direct, proxied = sessions
    flows = _task_flows(proxied)
    masked = [f for f in flows if as_object(f.metadata.get("obsmask")).get("action") == "masked"]
    before = len(original_content(flows[-1]))
    after = len(proxied.task[-1].recorded.body)
    assert after < before

    def row(served: Served) -> str:
        usage = _expected_usage(served)
        return f"{usage.input_tokens:,} ({usage.cached_input_tokens:,} cached)"

    lines = [
        f"Codex {MODEL}: {len(COMMANDS)} {SHELL} turns + final answer, "
        f"window {WINDOW_TURNS} tool turns",
        f"run time: direct {direct.run.seconds:.1f} s, through obsmask {proxied.run.seconds:.1f} s",
        f"requests masked: {len(masked)} of {len(flows)}; outputs masked per request: "
        + " ".join(
            str(as_object(f.metadata.get("obsmask")).get("masked_tool_results", 0)) for f in flows
        ),
        f"last request body: {before:,} bytes sent by Codex -> {after:,} bytes received "
        f"({100 * (before - after) / before:.0f}% less)",
        "provider usage per request, input tokens (of which cached):",
    ]
    for number, (d, p) in enumerate(zip(direct.task, proxied.task, strict=True)):
        lines.append(f"  {number:2d}: direct {row(d)} | through obsmask {row(p)}")
    total_direct = sum(_expected_usage(s).input_tokens or 0 for s in direct.task)
    total_proxied = sum(_expected_usage(s).input_tokens or 0 for s in proxied.task)
    lines.append(f"  input tokens in all: direct {total_direct:,}, through obsmask "
                 f"{total_proxied:,}")
    print("\n" + "\n".join(lines))
    assert total_proxied < total_direct


# The scripted server on its own --------------------------------------------------------


def _request(url: str, path: str, body: Json | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(
        url + path,
        data=None if body is None else compact(body).encode(),
        method="GET" if body is None else "POST",
        headers={"content-type": "application/json", **(headers or {})},
    )
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy from env
    try:
        with direct.open(request, timeout=10) as answer:
            return answer.status, answer.headers["content-type"], answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def _rebuilt(stream: bytes) -> Json:
    """The response a client rebuilds from a Responses SSE stream: the
    ``response.completed`` object, checked against the items and deltas."""
    done: list[object] = []
    texts: dict[str, str] = {}
    arguments: dict[str, str] = {}
    completed: Json = {}
    for number, (kind, data, _) in enumerate(sse_events(stream)):
        event = as_object(json.loads(data))
        assert event["type"] == kind and event["sequence_number"] == number
        if kind == "response.output_text.delta":
            key = as_str(event["item_id"])
            texts[key] = texts.get(key, "") + as_str(event["delta"])
        elif kind == "response.function_call_arguments.delta":
            key = as_str(event["item_id"])
            arguments[key] = arguments.get(key, "") + as_str(event["delta"])
        elif kind == "response.output_item.done":
            done.append(event["item"])
        elif kind == "response.completed":
            completed = as_object(event["response"])
    assert completed["output"] == done
    for item in map(as_object, done):
        if item["type"] == "message":
            part = as_object(as_list(item["content"])[0])
            assert texts[as_str(item["id"])] == part["text"]
        else:
            assert arguments[as_str(item["id"])] == item["arguments"]
    return completed


def test_the_scripted_server_answers_as_the_responses_api_does() -> None:
    """Streamed and whole answers agree; the usage is readable by obsmask's
    reader; the shell tool is found in either of Codex's shapes; a WebSocket
    upgrade gets a 426, unknown routes a 404, requests past the bound a 400."""
    exec_command = {
        "type": "function",
        "name": "exec_command",
        "parameters": {
            "type": "object",
            "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}},
            "required": ["cmd"],
        },
    }
    shell = {
        "type": "function",
        "name": "shell",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "array", "items": {"type": "string"}}},
            "required": ["command"],
        },
    }
    found = shell_tool([shell])
    assert found is not None and found.arguments("ls") == '{"command":["bash","-lc","ls"]}'
    found = shell_tool([{"type": "web_search"}, shell, exec_command])
    assert found is not None and found.arguments("ls") == '{"cmd":"ls"}'
    assert shell_tool([{"type": "custom", "name": "exec"}]) is None

    task: Json = {
        "model": "m",
        "tools": [exec_command],
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": PROMPT}]}],
    }
    with scripted_responses(PROMPT_MARKER, COMMANDS, FINAL, max_requests=7) as server:
        status, kind, stream = _request(server.url, "/v1/responses", {**task, "stream": True})
        assert (status, kind) == (200, "text/event-stream; charset=utf-8")
        status, kind, whole = _request(server.url, "/v1/responses", task)
        assert (status, kind) == (200, "application/json")
        streamed, response = _rebuilt(stream), _body(whole)

        def unnamed(response: Json) -> Json:
            return {k: v for k, v in response.items() if k not in ("id", "output", "usage")}

        assert unnamed(streamed) == unnamed(response)
        assert response["status"] == "completed"
        message, call = map(as_object, as_list(response["output"]))
        assert message["type"] == "message"
        assert (call["type"], call["name"], call["arguments"], call["call_id"]) == (
            "function_call", "exec_command", '{"cmd":"seq 1 3000"}', "call_scripted0000")
        # obsmask's reader finds the usage of the stream; the same prompt
        # again is read from the cache.
        assert read_usage([stream]).usage == ProviderUsage(
            input_tokens=len(compact({**task, "stream": True})) // 4,
            cached_input_tokens=0,
            output_tokens=21,
        )
        # The next step, once the first call is in the conversation.
        items = [*as_list(task["input"]), call,
                 {"type": "function_call_output", "call_id": call["call_id"], "output": "1"}]
        status, _, second = _request(server.url, "/v1/responses", {**task, "input": items})
        assert status == 200
        assert as_object(as_list(_body(second)["output"])[1])["arguments"] == (
            '{"cmd":"cat big_file.txt"}')
        side: Json = {"model": "m", "input": [{"role": "user", "content": "a title"}]}
        status, _, title = _request(server.url, "/v1/responses", side)
        assert status == 200
        text = as_object(as_list(as_object(as_list(_body(title)["output"])[0])["content"])[0])
        assert text["text"] == "Scripted side answer."
        status, _, refused = _request(server.url, "/v1/responses", None,
                                      {"upgrade": "websocket", "connection": "Upgrade"})
        assert status == 426 and "WebSocket" in as_str(
            as_object(_body(refused)["error"])["message"])
        status, _, models = _request(server.url, "/v1/models")
        assert status == 200 and _body(models)["data"] == []
        status, _, missing = _request(server.url, "/v1/other")
        assert status == 404 and "error" in _body(missing)
        status, _, over = _request(server.url, "/v1/responses", task)
        assert status == 400 and "more than 7 requests" in as_str(
            as_object(_body(over)["error"])["message"])
        assert [s.kind for s in server.served] == [
            "task", "task", "task", "other", "websocket", "models", "unknown", "over_limit",
        ]
        assert [s.step for s in server.task()] == [0, 0, 1]
