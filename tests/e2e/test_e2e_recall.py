"""End to end: recall, through a real mitmdump with obsmask, real SDK clients
and local stub servers, all on 127.0.0.1.

With ``obsmask_recall_enabled=true`` the proxy serves an MCP server itself
at ``/obsmask/mcp`` (streamable HTTP, JSON answers, no session) with one
tool, ``recall`` (``id``, optional ``first_line``/``last_line``,
``pattern``). It speaks both protocol eras of the SDK: the initialize
handshake (2025-11-25) and the stateless one (2026-07-28, server/discover),
and so does the gateway.

Conversation results: a masked result's placeholder ends with
``; recall id=<tool call id>``. Calling ``recall`` with that id answers a
short stub; the client puts the stub as the recall call's tool result in
its next request, and obsmask replaces it, on the way to the provider,
with the original text of that result taken from the same request (its
lines, when asked for a range), the same bytes in every later request. A
stub whose result the request no longer holds becomes a note saying so.
Driven by the real ``openai`` SDK (tests/clients/recall_chat_agent.py),
which offers the model the tools the real ``mcp`` client lists at
``/obsmask/mcp`` and calls them there; the "model" is a stub provider
that reads the recall id from the placeholder it receives.

MCP strings: a string that MCP truncation cuts gets ``; recall id=cut-<16
hex digits>`` in its marker and is kept whole in a SQLite store under
``obsmask_recall_data_dir``; ``recall`` with that id gives the whole text
back (or a range of its lines), also from another mitmdump started later
on the same directory; an id the store does not hold gets a JSON-RPC error
(-32602, "obsmask recall: no text with id ..."). A local MCP server
(tests/clients/log_mcp_server.py) is reached through the gateway; the
calls are made by the real ``mcp`` client (tests/clients/mcp_calls.py).

Recall off (the default): the route answers a JSON-RPC error with HTTP
404, and placeholders say nothing about recall.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.agents import CLIENTS, needs_clients, run_client
from support.mcp_servers import start_mcp_server
from support.processes import REPO, MitmdumpProcess, running_mitmdump
from support.recording_server import Answer, Recorded, RecordingServer, recording_server

pytestmark = [pytest.mark.e2e, needs_clients]

AGENT = CLIENTS / "recall_chat_agent.py"
MCP_CALLS = CLIENTS / "mcp_calls.py"
MCP_CLIENT = CLIENTS / "mcp_client.py"
LOG_SERVER = CLIENTS / "log_mcp_server.py"
CREATED = 1_700_000_000

RECALL_PATH = "/obsmask/mcp"
WINDOW_TURNS = 2
PLACEHOLDER = (
    "[Observation masquée: résultat d'outil ancien "
    "(tool_call_id={call_id}, outil={tool}, chars={chars}){recall}]"
)
# The recall id at the end of a placeholder, as a model would read it.
PLACEHOLDER_HINT = re.compile(r"; recall id=([A-Za-z0-9_.:\-]+)\]$")
STUB_START = "[obsmask-recall id="
GONE_ID = "call_gone_9"
RANGE = (3, 7)  # the line range the model asks for, 1-based, both included

MARKER = re.compile(
    r"\n\.\.\. \[OBSMASK_TRUNCATED original_chars=(\d+) head=2000 tail=2000"
    r"; recall id=(cut-[0-9a-f]{16})\] \.\.\.\n"
)
UNKNOWN_CUT_ID = "cut-0000000000000000"
INVALID_PARAMS = -32602
LOG_LINES = {"sse": 2000, "json": 1200}
LOG_RANGE = {"sse": (1200, 1210), "json": (1, 2)}


def _empty_config(directory: Path) -> Path:
    """An empty settings file: the repository's mitm.toml must not count."""
    config = directory / "empty.toml"
    config.write_text("", encoding="utf-8")
    return config


def _assert_no_internal_error(proxy: MitmdumpProcess) -> None:
    output = proxy.output()
    assert "Traceback" not in output, proxy.tail(60)
    assert "internal error" not in output, proxy.tail(60)
    assert "forwarded unchanged" not in output, proxy.tail(60)


# The stub provider: a model that recalls what was masked ------------------------------


class RecallModel:
    """A Chat Completions "model" that reads the requests it receives.

    Its tool turn is the number of assistant messages with ``tool_calls`` in
    the request. Turns 0-2: ``read_file`` of a new file (calls ``call_0`` to
    ``call_2``). Turn 3: ``recall`` of ``call_0``, with the id it reads at
    the end of that result's placeholder (``call_3``). Turn 4: two calls,
    ``recall`` of lines 3-7 of ``call_1`` (id read from its placeholder,
    ``call_4a``) and ``recall`` of an id no request ever held
    (``call_4b``). Then a text answer. A placeholder with no recall id
    ends the conversation early (the test then fails on what it lacks)."""

    def __init__(self) -> None:
        self.hints: list[dict[str, str]] = []  # per request: call id -> recall id read
        self._lock = threading.Lock()

    def __call__(self, recorded: Recorded) -> Answer:
        if recorded.method != "POST" or not recorded.path.endswith("/chat/completions"):
            return Answer(status=404, body=b'{"error": {"message": "not found"}}')
        request = json.loads(recorded.body)
        messages = request["messages"]
        turn = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        hints = {
            m["tool_call_id"]: match.group(1)
            for m in messages
            if m.get("role") == "tool" and isinstance(m.get("content"), str)
            and (match := PLACEHOLDER_HINT.search(m["content"]))
        }
        with self._lock:
            self.hints.append(hints)
        calls = self._calls(turn, hints)
        message: dict[str, Any] = {"role": "assistant", "refusal": None}
        if calls:
            message["content"] = None
            message["tool_calls"] = [
                {"id": call_id, "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
                for call_id, name, arguments in calls
            ]
            finish = "tool_calls"
        else:
            message["content"] = f"Done after {turn} tool turns."
            finish = "stop"
        answer = {
            "id": f"chatcmpl-recall-{turn}", "object": "chat.completion",
            "created": CREATED + turn, "model": request["model"],
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return Answer(body=json.dumps(answer).encode())

    @staticmethod
    def _calls(turn: int, hints: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
        if turn < 3:
            return [(f"call_{turn}", "read_file", {"path": f"src/settings_{turn}.py"})]
        if turn == 3 and "call_0" in hints:
            return [("call_3", "recall", {"id": hints["call_0"]})]
        if turn == 4 and "call_1" in hints:
            first, last = RANGE
            return [
                ("call_4a", "recall", {"id": hints["call_1"], "first_line": first,
                                       "last_line": last}),
                ("call_4b", "recall", {"id": GONE_ID}),
            ]
        return []


@dataclass
class Conversation:
    """The agent's run through mitmdump: its report, what the provider
    received, and the model's readings."""

    report: dict[str, Any]
    received: list[bytes]
    model: RecallModel
    proxy: MitmdumpProcess

    @property
    def sent_bodies(self) -> list[str]:
        return [r["sent_body"] for r in self.report["requests"]]

    def sent(self, number: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = json.loads(self.sent_bodies[number])["messages"]
        return messages

    def got(self, number: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = json.loads(self.received[number])["messages"]
        return messages

    def original(self, call_id: str) -> str:
        """The result of ``call_id`` as the client sent it (last request)."""
        return _content(self.sent(-1), call_id)


def _content(messages: list[dict[str, Any]], call_id: str) -> str:
    (text,) = [m["content"] for m in messages
               if m.get("role") == "tool" and m["tool_call_id"] == call_id]
    assert isinstance(text, str)
    return text


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Conversation]:
    """One run of the agent: window 2 tool turns, no price model, recall on."""
    work = tmp_path_factory.mktemp("recall-conversation")
    model = RecallModel()
    with recording_server(model) as server:
        arguments = [
            "--mode", f"reverse:{server.url}",
            "--set", f"obsmask_config={_empty_config(work)}",
            "--set", f"obsmask_window_turns={WINDOW_TURNS}",
            "--set", "obsmask_price_model=none",
            "--set", "obsmask_recall_enabled=true",
            "--set", f"obsmask_recall_data_dir={work / 'recall-data'}",
        ]
        with running_mitmdump(arguments, REPO, work / "confdir") as proxy:
            proxy.wait_for(r"obsmask: recall on")
            base = f"http://127.0.0.1:{proxy.port}"
            report = run_client(
                [str(AGENT), "--base-url", f"{base}/v1", "--recall-url", base + RECALL_PATH,
                 "--turns", "8"],
                [proxy],
            )
            received = [r.body for r in server.posts("/chat/completions")]
            yield Conversation(report, received, model, proxy)


def _raw_result(body: str, call_id: str) -> str:
    """The JSON string of ``call_id``'s tool result exactly as written in
    ``body`` (quotes and escapes included), read with JSON's own scanner."""
    key = re.search(r'"tool_call_id"\s*:\s*' + re.escape(json.dumps(call_id))
                    + r'\s*,\s*"content"\s*:\s*"', body)
    assert key is not None, f"no string content for {call_id}"
    _, end = json.decoder.scanstring(body, key.end())
    return body[key.end() - 1 : end]


def _spliced(text: str, replacements: list[tuple[str, str]], ascii_only: bool) -> str:
    """``text`` with each JSON-encoded old content replaced by the encoded new one."""
    for old, new in replacements:
        encoded = json.dumps(old)
        assert text.count(encoded) == 1, f"a tool result is not unique in the body: {old[:80]!r}"
        text = text.replace(encoded, json.dumps(new, ensure_ascii=ascii_only))
    return text


def _expected_messages(sent: list[dict[str, Any]], recalled: dict[str, str]
                       ) -> list[dict[str, Any]]:
    """What the provider should receive, worked out without the addon's
    code: each result in ``recalled`` replaced by its text, then every
    result of a tool turn older than the last WINDOW_TURNS replaced by its
    placeholder (with its recall id)."""
    turn_of: dict[str, int] = {}
    tool_of: dict[str, str] = {}
    turns = 0
    for message in sent:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            for call in message["tool_calls"]:
                turn_of[call["id"]] = turns
                tool_of[call["id"]] = call["function"]["name"]
            turns += 1
    out = []
    for message in sent:
        if message.get("role") == "tool":
            call_id = message["tool_call_id"]
            text = recalled.get(call_id, message["content"])
            if turn_of[call_id] < turns - WINDOW_TURNS:
                text = PLACEHOLDER.format(call_id=call_id, tool=tool_of[call_id],
                                          chars=len(text), recall=f"; recall id={call_id}")
            message = {**message, "content": text}
        out.append(message)
    return out


def _invariant_problems(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """The invariants of masking: no message added, removed or moved, and
    nothing changed but the content of ``role: "tool"`` messages."""
    if len(before) != len(after):
        return [f"{len(before)} messages became {len(after)}"]
    problems = []
    for position, (old, new) in enumerate(zip(before, after, strict=True)):
        if old.get("role") == "tool" and new.get("role") == "tool":
            old, new = dict(old), dict(new)
            old.pop("content"), new.pop("content")
        if old != new:
            problems.append(f"message {position} changed: {old!r} -> {new!r}")
    return problems


def _lines(text: str, first: int, last: int) -> str:
    """Lines ``first`` to ``last`` (1-based, both included) of ``text``, as they are."""
    return "".join(text.splitlines(keepends=True)[first - 1 : last])


def _recalled_texts(run: Conversation) -> dict[str, str]:
    """The text each recall call's result should become: the original of
    call_0 whole (call_3), lines 3-7 of call_1's (call_4a), and the note the
    provider received for the id no request held (call_4b), checked on its
    own in its test."""
    note = _content(run.got(5), "call_4b") if len(run.received) > 5 else ""
    return {"call_3": run.original("call_0"),
            "call_4a": _lines(run.original("call_1"), *RANGE),
            "call_4b": note}


# Conversation recall --------------------------------------------------------------------


def test_the_agent_offers_the_recall_tool_listed_by_the_proxy_and_its_calls_get_stubs(
    conversation: Conversation,
) -> None:
    """The real mcp client lists one tool at /obsmask/mcp, ``recall``, which
    the agent offers the model; each recall of a conversation result is
    answered with a short stub naming the id (and the line range asked
    for), not with the text: the text is put in by the proxy later."""
    report = conversation.report
    names = [tool["function"]["name"] for tool in report["tools"]]
    assert names == ["read_file", "recall"]
    schema = report["tools"][1]["function"]["parameters"]
    assert schema["required"] == ["id"]
    assert {"id", "first_line", "last_line", "pattern"} <= set(schema["properties"])
    calls = {call["call_id"]: call for call in report["mcp_calls"]}
    assert sorted(calls) == ["call_3", "call_4a", "call_4b"], report["mcp_calls"]
    assert calls["call_3"]["arguments"] == {"id": "call_0"}
    assert calls["call_3"]["text"].startswith(f"{STUB_START}call_0]")
    first, last = RANGE
    assert calls["call_4a"]["text"].startswith(f"{STUB_START}call_1 lines={first}-{last}]")
    assert calls["call_4b"]["text"].startswith(f"{STUB_START}{GONE_ID}]")
    for call in calls.values():
        assert call["isError"] is False, call
        assert "(obsmask puts" in call["text"], call
        assert len(call["text"]) < 200, call
    _assert_no_internal_error(conversation.proxy)


def test_the_placeholder_of_a_masked_result_ends_with_its_recall_id(
    conversation: Conversation,
) -> None:
    """With recall on, the placeholder of a masked result is the usual one
    with ``; recall id=<its tool call id>`` at the end: in request 3 (three
    tool turns, window 2) the result of call_0 is exactly that, and the
    model read the id there."""
    assert len(conversation.received) >= 4, conversation.proxy.tail(40)
    original = conversation.original("call_0")
    got = _content(conversation.got(3), "call_0")
    assert got == PLACEHOLDER.format(call_id="call_0", tool="read_file",
                                     chars=len(original), recall="; recall id=call_0")
    assert conversation.model.hints[3] == {"call_0": "call_0"}


def test_a_recalled_result_reaches_the_provider_byte_for_byte_as_first_sent(
    conversation: Conversation,
) -> None:
    """The client sends the recall stub as the result of call_3 (request
    4); the provider receives, in its place, the original text of call_0's
    result, exactly what the client sent for call_0: the same string, and
    the same bytes in the body, once (call_0 itself goes as its
    placeholder)."""
    assert len(conversation.received) == 6, conversation.proxy.tail(40)
    stub = next(c["text"] for c in conversation.report["mcp_calls"] if c["call_id"] == "call_3")
    assert _content(conversation.sent(4), "call_3") == stub  # what the client sent
    original = conversation.original("call_0")
    assert _content(conversation.sent(3), "call_0") == original
    assert _content(conversation.got(4), "call_3") == original
    received = conversation.received[4].decode("utf-8")
    assert _raw_result(received, "call_3") == json.dumps(original)
    assert received.count(json.dumps(original)) == 1
    assert _raw_result(conversation.sent_bodies[4], "call_0") == json.dumps(original)


def test_every_later_request_carries_the_same_bytes_for_a_recalled_result(
    conversation: Conversation,
) -> None:
    """Request 5 (one more tool turn, call_3 still in the window) sends the
    stub again; the provider receives exactly the bytes it received for
    call_3 in request 4."""
    assert len(conversation.received) == 6, conversation.proxy.tail(40)
    assert _content(conversation.sent(5), "call_3").startswith(f"{STUB_START}call_0]")
    in_4 = _raw_result(conversation.received[4].decode("utf-8"), "call_3")
    in_5 = _raw_result(conversation.received[5].decode("utf-8"), "call_3")
    assert in_5 == in_4
    assert json.loads(in_5) == conversation.original("call_0")


def test_a_recall_of_a_line_range_gives_exactly_those_lines(
    conversation: Conversation,
) -> None:
    """``first_line=3, last_line=7`` on call_1's result (60 lines): the
    provider receives those five lines as the client sent them, newlines
    included, and nothing else."""
    assert len(conversation.received) == 6, conversation.proxy.tail(40)
    original = conversation.original("call_1")
    assert len(original.splitlines()) == 60
    first, last = RANGE
    expected = _lines(original, first, last)
    assert expected.count("\n") == last - first + 1
    assert expected.startswith("src/settings_1.py:003:")
    assert _content(conversation.got(5), "call_4a") == expected


def test_a_recall_of_a_result_not_in_the_request_becomes_a_note_saying_so(
    conversation: Conversation,
) -> None:
    """The stub of an id no request holds does not reach the provider as
    a stub, nor as any other result's text: it becomes a note that names
    the id and says the result is no longer in the conversation."""
    assert len(conversation.received) == 6, conversation.proxy.tail(40)
    stub = _content(conversation.sent(5), "call_4b")
    assert stub.startswith(f"{STUB_START}{GONE_ID}]")
    note = _content(conversation.got(5), "call_4b")
    assert note != stub
    assert STUB_START not in note
    assert GONE_ID in note
    assert "no longer in this conversation" in note
    for call_id in ("call_0", "call_1", "call_2"):
        assert conversation.original(call_id) not in note


def test_recall_changes_nothing_but_tool_result_contents_and_every_other_byte_stays(
    conversation: Conversation,
) -> None:
    """Request by request, the provider receives the client's body with
    old results as placeholders (window 2) and recall stubs replaced, and
    nothing else: the same messages in the same order, the same ids and
    tool calls, the other fields as sent, and every other byte as the
    client wrote it."""
    run = conversation
    assert len(run.received) == len(run.sent_bodies) == 6, run.proxy.tail(40)
    recalled = _recalled_texts(run)
    for number, (sent_text, received) in enumerate(zip(run.sent_bodies, run.received,
                                                       strict=True)):
        sent_body = json.loads(sent_text)
        got_body = json.loads(received)
        assert not _invariant_problems(sent_body["messages"], got_body["messages"]), number
        assert {k: v for k, v in got_body.items() if k != "messages"} == {
            k: v for k, v in sent_body.items() if k != "messages"}, number
        expected = _expected_messages(sent_body["messages"], recalled)
        assert got_body["messages"] == expected, f"request {number}"
        pairs = [(old["content"], new["content"])
                 for old, new in zip(sent_body["messages"], expected, strict=True)
                 if old.get("role") == "tool" and old["content"] != new["content"]]
        assert received.decode("utf-8") in {
            _spliced(sent_text, pairs, ascii_only=False),
            _spliced(sent_text, pairs, ascii_only=True),
        }, f"request {number}"
    # Masking did happen: request 3 on; before it, bodies went as sent.
    assert [run.received[n] == run.sent_bodies[n].encode() for n in range(6)] == [
        True, True, True, False, False, False]
    _assert_no_internal_error(run.proxy)


# A cut MCP string, recalled after a restart ---------------------------------------------


def _post_json(port: int, path: str, message: object) -> tuple[int, str, Any]:
    """POST one JSON-RPC message straight to mitmdump: (status, content type, JSON body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", path, json.dumps(message),
                           {"content-type": "application/json",
                            "accept": "application/json, text/event-stream"})
        response = connection.getresponse()
        body = response.read()
        return response.status, response.getheader("content-type") or "", json.loads(body)
    finally:
        connection.close()


@dataclass
class CutRun:
    """The log calls through the gateway of a first mitmdump, then the
    recalls at a second one started on the same data directory."""

    direct: dict[str, str]  # variant -> the whole text, from the server itself
    cut: dict[str, list[str]]  # variant -> the texts through the gateway
    ids: dict[str, str]  # variant -> the recall id of its marker
    recalls: list[dict[str, Any]]  # the steps at the second mitmdump
    # The same gateway calls and recalls made by a client of the other
    # protocol era (the SDK's default mode: 2026-07-28, no initialize).
    cut_by_protocol: dict[str, list[str]]  # protocol version -> gateway texts
    recalls_by_protocol: dict[str, list[dict[str, Any]]]
    ping_after: tuple[int, str, Any]
    data_dir_files: list[str]
    first: MitmdumpProcess
    second: MitmdumpProcess


@pytest.fixture(scope="module")
def cut_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CutRun]:
    """Two MCP servers (one answering with SSE, one with JSON) behind the
    gateway of a mitmdump with recall on: the real mcp client calls
    ``build_log`` on each, directly and through the gateway (the SSE one
    twice). That mitmdump and the servers are stopped; a new mitmdump on
    the same data directory, with no MCP server at all, answers the
    recalls."""
    work = tmp_path_factory.mktemp("recall-cut")
    data = work / "recall-data"
    empty = _empty_config(work)
    recall = ["--set", f"obsmask_config={empty}", "--set", "obsmask_recall_enabled=true",
              "--set", f"obsmask_recall_data_dir={data}"]
    with ExitStack() as stack:
        servers = {}
        for variant in LOG_LINES:
            arguments = ["--json-response"] if variant == "json" else []
            servers[variant] = server = start_mcp_server(LOG_SERVER, arguments, variant,
                                                         work / f"{variant}.log")
            stack.callback(server.stop)
        for server in servers.values():
            server.wait_until_listening()
        urls = {variant: server.url for variant, server in servers.items()}
        gateway = [a for v, url in urls.items()
                   for a in ("--set", f"mcpmask_gateway_servers={v}={url}")]
        first = stack.enter_context(running_mitmdump([*recall, *gateway], REPO,
                                                     work / "confdir-1"))
        first.wait_for(r"obsmask: recall on")

        def log_call(url: str, variant: str) -> dict[str, Any]:
            return {"url": url, "name": "build_log",
                    "arguments": {"lines": LOG_LINES[variant], "tag": variant}}

        plan = [log_call(url, v) for v, url in urls.items()]
        for variant, times in (("sse", 2), ("json", 1)):
            route = f"http://127.0.0.1:{first.port}/api/mcp-gateway/{variant}/rpc"
            plan += [log_call(route, variant)] * times
        steps = run_client([str(MCP_CALLS), "--plan", json.dumps(plan)], [first])["steps"]
        gateway_plan = plan[len(urls):]
        cut_by_protocol = {}
        for mode in ("legacy", "auto"):
            answered = run_client([str(MCP_CALLS), "--plan", json.dumps(gateway_plan),
                                    "--mode", mode], [first])["steps"]
            cut_by_protocol[str(answered[0]["protocol_version"])] = [
                _only_text(step) for step in answered]
        texts = [_only_text(step) for step in steps]
        direct = {"sse": texts[0], "json": texts[1]}
        cut = {"sse": texts[2:4], "json": texts[4:5]}
        ids = {}
        for variant, answers in cut.items():
            found = MARKER.search(answers[0])
            if found is not None:
                ids[variant] = found.group(2)
    # The first mitmdump and both servers are stopped.
    data_dir_files = sorted(p.name for p in data.iterdir()) if data.is_dir() else []
    with running_mitmdump(recall, REPO, work / "confdir-2") as second:
        second.wait_for(r"obsmask: recall on")
        url = f"http://127.0.0.1:{second.port}{RECALL_PATH}"
        plan: list[dict[str, Any]] = []
        for variant, recall_id in ids.items():
            first_line, last_line = LOG_RANGE[variant]
            plan += [
                {"url": url, "name": "recall", "arguments": {"id": recall_id}},
                {"url": url, "name": "recall",
                 "arguments": {"id": recall_id, "first_line": first_line,
                               "last_line": last_line}},
            ]
        # The unknown id among the others: the calls after it still get
        # answers (the last one asks for no stored text at all).
        plan.insert(min(2, len(plan)),
                    {"url": url, "name": "recall", "arguments": {"id": UNKNOWN_CUT_ID}})
        plan.append({"url": url, "name": "recall", "arguments": {"id": "call_after_error"}})
        recalls = run_client([str(MCP_CALLS), "--plan", json.dumps(plan)], [second])["steps"]
        recalls_by_protocol = {}
        for mode in ("legacy", "auto"):
            answered = run_client([str(MCP_CALLS), "--plan", json.dumps(plan), "--mode", mode],
                                   [second])["steps"]
            recalls_by_protocol[str(answered[0]["protocol_version"])] = answered
        ping = _post_json(second.port, RECALL_PATH, {"jsonrpc": "2.0", "id": 99,
                                                     "method": "ping"})
        yield CutRun(direct, cut, ids, recalls, cut_by_protocol, recalls_by_protocol, ping,
                     data_dir_files, first, second)


def _only_text(step: dict[str, Any]) -> str:
    assert step["ok"] and not step["isError"], step
    (block,) = step["content"]
    assert block["type"] == "text"
    text: str = block["text"]
    return text


def _recall_step(run: CutRun, variant: str, ranged: bool) -> dict[str, Any]:
    recall_id = run.ids.get(variant)
    assert recall_id is not None, (
        f"the {variant} answer's marker carries no recall id:\n"
        f"{run.cut[variant][0][1950:2200]!r}\nfirst mitmdump:\n{run.first.tail(30)}"
    )
    (step,) = [s for s in run.recalls
               if s["arguments"]["id"] == recall_id and ("first_line" in s["arguments"]) == ranged]
    return step


def test_the_gateway_and_the_recall_server_answer_both_protocol_eras_alike(
    cut_run: CutRun
) -> None:
    """A client of the real SDK in its default mode (protocol 2026-07-28,
    stateless, no initialize) and one that initializes (2025-11-25) get
    the same cut texts through the gateway, and the same recalls, errors
    included, from the proxy's recall server."""
    assert set(cut_run.cut_by_protocol) == {"2026-07-28", "2025-11-25"}
    old, new = (cut_run.cut_by_protocol[v] for v in ("2025-11-25", "2026-07-28"))
    assert old == new == cut_run.cut["sse"] + cut_run.cut["json"]
    assert set(cut_run.recalls_by_protocol) == {"2026-07-28", "2025-11-25"}

    def answers(steps: list[dict[str, Any]]) -> list[object]:
        return [(s["ok"], s.get("content"), (s.get("error") or {}).get("code")) for s in steps]

    old_recalls, new_recalls = (cut_run.recalls_by_protocol[v]
                                for v in ("2025-11-25", "2026-07-28"))
    assert answers(old_recalls) == answers(new_recalls) == answers(cut_run.recalls)
    assert any(step["ok"] for step in new_recalls) and not all(step["ok"] for step in new_recalls)


@pytest.mark.parametrize("variant", list(LOG_LINES))
def test_the_marker_of_a_cut_mcp_string_carries_a_recall_id_and_the_store_keeps_it(
    cut_run: CutRun, variant: str
) -> None:
    """Through the gateway, the long text comes back as its first 2,000
    characters, the marker with ``; recall id=cut-<16 hex digits>``, and
    its last 2,000; the same text cut again gets the same marker; two texts
    get two ids; the store's file is in the data directory."""
    original = cut_run.direct[variant]
    assert len(original) > 4000 and original.count("\n") == LOG_LINES[variant] - 1
    text = cut_run.cut[variant][0]
    found = MARKER.search(text)
    assert found is not None, f"{text[1950:2200]!r}\n{cut_run.first.tail(30)}"
    assert int(found.group(1)) == len(original)
    assert text == original[:2000] + found.group(0) + original[-2000:]
    assert all(again == text for again in cut_run.cut[variant])
    assert len(set(cut_run.ids.values())) == len(cut_run.ids), "two texts, two ids"
    assert "recall.sqlite3" in cut_run.data_dir_files, cut_run.data_dir_files


@pytest.mark.parametrize("variant", list(LOG_LINES))
def test_a_cut_mcp_string_is_recalled_whole_after_the_proxy_restarted(
    cut_run: CutRun, variant: str
) -> None:
    """With the first mitmdump and the MCP server gone, a new mitmdump on the
    same data directory answers ``recall`` with that id with the whole
    original text, identical to what the server returned, uncut."""
    step = _recall_step(cut_run, variant, ranged=False)
    assert _only_text(step) == cut_run.direct[variant], (
        f"{step!r:.600}\nsecond mitmdump:\n{cut_run.second.tail(30)}"
    )


@pytest.mark.parametrize("variant", list(LOG_LINES))
def test_a_line_range_of_a_cut_mcp_string_is_recalled_after_the_proxy_restarted(
    cut_run: CutRun, variant: str
) -> None:
    """``first_line``/``last_line`` on a stored text gives exactly those
    lines of the original, as they are."""
    step = _recall_step(cut_run, variant, ranged=True)
    first, last = LOG_RANGE[variant]
    expected = _lines(cut_run.direct[variant], first, last)
    assert expected.count("\n") == last - first + 1
    assert f"step {first:05d}:" in expected and f"step {last:05d}:" in expected
    assert _only_text(step) == expected, f"{step!r:.600}"


def test_an_unknown_cut_id_gets_a_json_rpc_error_and_the_proxy_goes_on_serving(
    cut_run: CutRun,
) -> None:
    """``recall`` with ``cut-0000000000000000``, which the store never held:
    the mcp client raises a JSON-RPC error, code -32602, whose message says
    there is no text with that id; a call after it on the same connection
    gets its answer, mitmdump answers a ping after it, and logged no
    traceback."""
    (step,) = [s for s in cut_run.recalls if s["arguments"] == {"id": UNKNOWN_CUT_ID}]
    assert step["ok"] is False, step
    assert step["error"]["code"] == INVALID_PARAMS
    assert step["error"]["message"].startswith(
        f"obsmask recall: no text with id {UNKNOWN_CUT_ID}"), step
    # The last call, on the same connection, needs no stored text: answered.
    last = cut_run.recalls[-1]
    assert cut_run.recalls.index(step) < len(cut_run.recalls) - 1
    assert last["ok"] is True, last
    assert _only_text(last).startswith(f"{STUB_START}call_after_error]"), last
    status, content_type, body = cut_run.ping_after
    assert (status, content_type) == (200, "application/json")
    assert body == {"jsonrpc": "2.0", "id": 99, "result": {}}
    for proxy in (cut_run.first, cut_run.second):
        assert "Traceback" not in proxy.output(), proxy.tail(60)
        assert "internal error" not in proxy.output(), proxy.tail(60)


# Recall off -------------------------------------------------------------------------------


def _text_completion(recorded: Recorded) -> Answer:
    """A provider that answers every request with a short text."""
    answer = {
        "id": "chatcmpl-off", "object": "chat.completion", "created": CREATED,
        "model": "stub-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return Answer(body=json.dumps(answer).encode())


@dataclass
class OffProxy:
    proxy: MitmdumpProcess
    server: RecordingServer


@pytest.fixture(scope="module")
def recall_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OffProxy]:
    """mitmdump in reverse mode with the default settings (recall off),
    window 1 tool turn."""
    work = tmp_path_factory.mktemp("recall-off")
    with recording_server(_text_completion) as server:
        arguments = ["--mode", f"reverse:{server.url}",
                     "--set", f"obsmask_config={_empty_config(work)}",
                     "--set", "obsmask_window_turns=1"]
        with running_mitmdump(arguments, REPO, work / "confdir") as proxy:
            proxy.wait_for(r"obsmask: recall off")
            yield OffProxy(proxy, server)


def test_with_recall_off_the_recall_route_answers_a_json_rpc_error_with_404(
    recall_off: OffProxy,
) -> None:
    """An MCP initialize POSTed to /obsmask/mcp: mitmdump answers it itself
    (nothing reaches the upstream) with HTTP 404 and a JSON-RPC error whose
    message says recall is off; the real mcp client, connecting there,
    fails with that JSON-RPC error (the SDK's MCPError), not a transport
    error."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "e2e", "version": "0"}}}
    status, content_type, body = _post_json(recall_off.proxy.port, RECALL_PATH, initialize)
    assert status == 404
    assert content_type.startswith("application/json")
    assert body["jsonrpc"] == "2.0" and "result" not in body
    assert isinstance(body["error"]["code"], int)
    message = body["error"]["message"]
    assert message.startswith("obsmask recall:") and "off" in message, message
    url = f"http://127.0.0.1:{recall_off.proxy.port}{RECALL_PATH}"
    failed = run_client([str(MCP_CLIENT), "--url", url, "--mode", "legacy", "--timeout", "10",
                          "--expect-error"], [recall_off.proxy])
    assert failed["ok"] is True and failed["error"]["message"] == message, failed
    assert [(e["method"], e["status"]) for e in failed["exchanges"]] == [("POST", 404)]
    assert [r.path for r in recall_off.server.requests if RECALL_PATH in r.path] == []


def test_with_recall_off_placeholders_have_no_recall_id_and_stubs_go_as_sent(
    recall_off: OffProxy,
) -> None:
    """A Chat Completions body with three tool turns through the proxy
    (window 1): the oldest result becomes the plain placeholder, with no
    ``recall id=``; a result that looks like a recall stub is not replaced
    (it goes as the client sent it)."""
    original = "\n".join(f"src/a.py:{n:03d}: value_{n} = {n * 3}" for n in range(1, 101))
    stub = ("[obsmask-recall id=call_a] "
            "(obsmask puts the text here in the model's next request)")
    recent = "\n".join(f"src/c.py:{n:03d}: other_{n} = {n * 5}" for n in range(1, 101))

    def call(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}]}

    messages = [
        {"role": "user", "content": "read the files"},
        call("call_a", "read_file", {"path": "src/a.py"}),
        {"role": "tool", "tool_call_id": "call_a", "content": original},
        call("call_b", "recall", {"id": "call_a"}),
        {"role": "tool", "tool_call_id": "call_b", "content": stub},
        call("call_c", "read_file", {"path": "src/c.py"}),
        {"role": "tool", "tool_call_id": "call_c", "content": recent},
    ]
    plain_b = PLACEHOLDER.format(call_id="call_b", tool="recall", chars=len(stub), recall="")
    assert len(stub) < len(plain_b), "premise: the stub is too short to be masked"
    body = {"model": "stub-model", "messages": messages}
    status, _, answer = _post_json(recall_off.proxy.port, "/v1/chat/completions", body)
    assert status == 200 and answer["choices"][0]["message"]["content"] == "ok"
    (received,) = recall_off.server.posts("/chat/completions")
    got = json.loads(received.body)["messages"]
    assert not _invariant_problems(messages, got)
    placeholder = _content(got, "call_a")
    assert placeholder == PLACEHOLDER.format(call_id="call_a", tool="read_file",
                                             chars=len(original), recall="")
    assert "; recall id=" not in received.body.decode("utf-8")
    assert _content(got, "call_b") == stub
    assert _content(got, "call_c") == recent
    _assert_no_internal_error(recall_off.proxy)
