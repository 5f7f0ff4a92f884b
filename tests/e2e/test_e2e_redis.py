"""End to end: several proxies, one memory. Two real mitmdump processes with
obsmask share one real redis-server (``[recall] store = "redis://..."``),
all on 127.0.0.1 and each stopped by its pid.

A local MCP server (tests/clients/log_mcp_server.py, JSON answers) sits
behind both proxies' gateways; the real ``mcp`` client
(tests/clients/mcp_calls.py) calls its ``build_log`` through them, and the
recall server at ``/obsmask/mcp`` is asked with plain JSON-RPC POSTs.

- A string cut by the first proxy is recalled whole through the second;
  after both proxies restart it is still there; once past its age (its
  key's TTL, which a put sets to ``store_max_days``, run out: the test
  shortens it, not having a week) it is gone, and recall answers the
  JSON-RPC error that says it expired.
- The fault: redis-server stopped mid-run. Both proxies still answer every
  tool call cut exactly as before (head, marker, tail, byte for byte),
  recall answers a clean JSON-RPC error (-32603, naming the server), each
  proxy logs one warning line for it, not one per flow; the server started
  again on the same port (its append-only file), both recall again with
  no restart, and strings cut from then on are kept again.
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.agents import CLIENTS, needs_clients, run_client
from support.mcp_servers import McpServer, start_mcp_server
from support.processes import REPO, MitmdumpProcess, running_mitmdump, wait_for_lines
from support.redis_server import RedisServer, needs_redis

pytestmark = [pytest.mark.e2e, needs_clients, needs_redis]

MCP_CALLS = CLIENTS / "mcp_calls.py"
LOG_SERVER = CLIENTS / "log_mcp_server.py"
RECALL_PATH = "/obsmask/mcp"
PREFIX = "e2e-two-proxies:"
MARKER = re.compile(
    r"\n\.\.\. \[OBSMASK_TRUNCATED original_chars=(\d+) head=2000 tail=2000"
    r"; recall id=(cut-[0-9a-f]{16})\] \.\.\.\n"
)
INVALID_PARAMS = -32602
STORE_FAILED = -32603
WEEK_MS = 7 * 86_400_000
OUTAGE_WARNING = r"obsmask: recall store: .* until it works again"


def _texts(plan: list[dict[str, Any]], proxies: list[MitmdumpProcess]) -> list[str]:
    texts = []
    for step in run_client([str(MCP_CALLS), "--plan", json.dumps(plan)], proxies)["steps"]:
        assert step["ok"] and not step["isError"], step
        (block,) = step["content"]
        texts.append(block["text"])
    return texts


def _recall(proxy: MitmdumpProcess, recall_id: str) -> dict[str, Any]:
    """One tools/call of recall, POSTed straight to the proxy's route."""
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "recall", "arguments": {"id": recall_id}}}
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=15)
    try:
        connection.request("POST", RECALL_PATH, json.dumps(message),
                           {"content-type": "application/json",
                            "accept": "application/json, text/event-stream"})
        response = connection.getresponse()
        reply: dict[str, Any] = json.loads(response.read())
        return reply
    finally:
        connection.close()


def _recalled_text(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    text: str = reply["result"]["content"][0]["text"]
    return text


def _expected_cut(original: str, recall_id: str) -> str:
    return (f"{original[:2000]}\n... [OBSMASK_TRUNCATED original_chars={len(original)} "
            f"head=2000 tail=2000; recall id={recall_id}] ...\n{original[-2000:]}")


@dataclass
class Deployment:
    """A redis-server, the log MCP server, and the proxies' arguments."""

    work: Path
    redis: RedisServer
    log_server: McpServer

    def arguments(self) -> list[str]:
        config = self.work / "empty.toml"
        config.write_text("", encoding="utf-8")
        return ["--set", f"obsmask_config={config}", "--set", "obsmask_recall_enabled=true",
                "--set", f"obsmask_recall_store={self.redis.url}",
                "--set", f"obsmask_recall_store_key_prefix={PREFIX}",
                # Never the SQLite file: a recall that worked through it
                # would prove nothing about Redis.
                "--set", f"obsmask_recall_data_dir={self.work / 'no-sqlite-here'}",
                "--set", f"mcpmask_gateway_servers=log={self.log_server.url}"]

    def proxies(self, stack: ExitStack, name: str) -> tuple[MitmdumpProcess, MitmdumpProcess]:
        pair = tuple(stack.enter_context(running_mitmdump(self.arguments(), REPO,
                                                          self.work / f"confdir-{name}-{n}"))
                     for n in (1, 2))
        for proxy in pair:
            proxy.wait_for(r"obsmask: recall on: .* kept in redis://")
        first, second = pair
        return first, second

    def log_call(self, proxy: MitmdumpProcess | None, lines: int, tag: str) -> dict[str, Any]:
        url = (self.log_server.url if proxy is None
               else f"http://127.0.0.1:{proxy.port}/api/mcp-gateway/log/rpc")
        return {"url": url, "name": "build_log", "arguments": {"lines": lines, "tag": tag}}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    work = tmp_path_factory.mktemp("two-proxies")
    redis = RedisServer(work / "redis")
    redis.start()
    log_server = start_mcp_server(LOG_SERVER, ["--json-response"], "log", work / "log.log")
    try:
        log_server.wait_until_listening()
        yield Deployment(work, redis, log_server)
    finally:
        log_server.stop()
        redis.stop()


# One memory: cut by one, recalled through the other, across restarts ---------------------


@dataclass
class SharedRun:
    original: str
    cut: str
    recall_id: str
    through_second: dict[str, Any]
    after_restart: list[dict[str, Any]]
    ttl_ms: int
    after_its_age: dict[str, Any]
    proxies: list[MitmdumpProcess]


@pytest.fixture(scope="module")
def shared_run(deployment: Deployment) -> SharedRun:
    with ExitStack() as stack:
        first, second = deployment.proxies(stack, "before")
        original, cut = _texts([deployment.log_call(None, 1500, "shared"),
                                deployment.log_call(first, 1500, "shared")], [first])
        found = MARKER.search(cut)
        assert found is not None, cut[1950:2200]
        recall_id = found.group(2)
        # The put runs on the first proxy's store thread: until it is in
        # Redis, the second proxy has nothing to give.
        client = deployment.redis.client()
        key = f"{PREFIX}recall:{recall_id}"
        for _ in range(100):
            if client.exists(key):
                break
            time.sleep(0.05)
        through_second = _recall(second, recall_id)
    # Both proxies stopped; two new ones on the same server.
    with ExitStack() as stack:
        first, second = deployment.proxies(stack, "after")
        after_restart = [_recall(second, recall_id), _recall(first, recall_id)]
        ttl_ms = int(client.pttl(key))
        # Past its age: the TTL a put set (store_max_days) run out.
        client.pexpire(key, 1)
        time.sleep(0.05)
        after_its_age = _recall(second, recall_id)
        return SharedRun(original, cut, recall_id, through_second, after_restart, ttl_ms,
                         after_its_age, [first, second])


def test_a_string_cut_by_the_first_proxy_is_recalled_whole_through_the_second(shared_run):
    assert len(shared_run.original) > 4000
    assert shared_run.cut == _expected_cut(shared_run.original, shared_run.recall_id)
    assert _recalled_text(shared_run.through_second) == shared_run.original


def test_after_both_proxies_restart_the_string_is_still_recalled_whole(shared_run):
    for reply in shared_run.after_restart:
        assert _recalled_text(reply) == shared_run.original


def test_the_entry_lives_in_redis_for_store_max_days(shared_run):
    assert WEEK_MS - 120_000 < shared_run.ttl_ms <= WEEK_MS


def test_past_its_age_the_string_is_gone_with_the_error_that_says_it_expired(shared_run):
    error = shared_run.after_its_age["error"]
    assert error["code"] == INVALID_PARAMS
    assert f"no text with id {shared_run.recall_id}: it expired" in error["message"]
    for proxy in shared_run.proxies:
        assert "Traceback" not in proxy.output(), proxy.tail(40)


# The fault: redis-server stopped mid-run, then back ----------------------------------------


@dataclass
class FaultRun:
    originals: dict[str, str]  # tag -> the whole text
    cuts: dict[str, list[str]]  # tag -> the answers through each proxy
    before_id: str
    during: list[dict[str, Any]]  # recalls through both, server down
    back: list[dict[str, Any]]  # the same, once it is back
    after_id: str
    after: list[dict[str, Any]]
    outputs: list[str]


@pytest.fixture(scope="module")
def fault_run(deployment: Deployment) -> FaultRun:
    tags = {"before": "f-before", "during": "f-during", "after": "f-after"}
    originals: dict[str, str] = {}
    cuts: dict[str, list[str]] = {}
    with ExitStack() as stack:
        first, second = deployment.proxies(stack, "fault")
        pair = [first, second]

        def through_both(tag: str) -> None:
            texts = _texts([deployment.log_call(None, 1200, tag),
                            deployment.log_call(first, 1200, tag),
                            deployment.log_call(second, 1200, tag)], pair)
            originals[tag], cuts[tag] = texts[0], texts[1:]

        def cut_id(tag: str) -> str:
            found = MARKER.search(cuts[tag][0])
            assert found is not None, cuts[tag][0][1950:2200]
            return found.group(2)

        through_both(tags["before"])
        before_id = cut_id(tags["before"])
        time.sleep(0.3)  # the puts of both proxies' store threads
        deployment.redis.stop()
        for _ in range(3):
            through_both(tags["during"])
        during = [_recall(proxy, before_id) for proxy in pair for _ in range(2)]
        for proxy in pair:
            wait_for_lines(proxy, OUTAGE_WARNING, 1, 5.0)
        deployment.redis.start()
        back = [_recall(proxy, before_id) for proxy in pair]
        through_both(tags["after"])
        after_id = cut_id(tags["after"])
        time.sleep(0.3)
        after = [_recall(second, after_id), _recall(first, after_id)]
        outputs = [proxy.output() for proxy in pair]
    return FaultRun(originals, cuts, before_id, during, back, after_id, after, outputs)


def test_with_redis_stopped_traffic_through_both_proxies_stays_byte_correct(fault_run):
    for tag, answers in fault_run.cuts.items():
        original = fault_run.originals[tag]
        found = MARKER.search(answers[0])
        assert found is not None
        for answer in answers:
            assert answer == _expected_cut(original, found.group(2)), tag


def test_with_redis_stopped_recall_answers_a_clean_json_rpc_error_naming_the_server(
        fault_run, deployment):
    for reply in fault_run.during:
        assert reply["error"]["code"] == STORE_FAILED
        assert "the store cannot be read" in reply["error"]["message"]
        assert deployment.redis.url in reply["error"]["message"]


def test_each_proxy_logs_the_outage_in_one_warning_line_and_no_traceback(fault_run):
    for output in fault_run.outputs:
        assert len(re.findall(OUTAGE_WARNING, output)) == 1, output[-3000:]
        assert "Traceback" not in output
        assert "forwarded unchanged" not in output
        assert "recall store: works again" in output


def test_once_redis_is_back_both_proxies_recall_again_without_a_restart(fault_run):
    for reply in fault_run.back:
        assert _recalled_text(reply) == fault_run.originals["f-before"]
    for reply in fault_run.after:
        assert _recalled_text(reply) == fault_run.originals["f-after"]
