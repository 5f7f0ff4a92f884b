"""End to end: the real ``mcp`` SDK, client and server, through a real mitmdump with obsmask.

The MCP truncation cuts long strings in MCP (JSON-RPC 2.0) responses to head
+ marker + tail, for ``application/json`` answers (buffered) and
``text/event-stream`` answers (rewritten event by event while streaming),
with the default limits ``max_chars = 4000``, ``head_chars = 2000``,
``tail_chars = 2000`` and the marker ``\\n... [OBSMASK_TRUNCATED
original_chars={original_chars} head={head} tail={tail}] ...\\n``; one log
line per truncated message in mitmdump's output. Base64 image data is not
cut. The gateway forwards ``/api/mcp-gateway/{server_name}/rpc`` to the server
of that name (``mcpmask_gateway_servers`` or ``[mcp_gateway.servers]``) and,
when it cannot, answers with a JSON-RPC 2.0 error with a code of its own:
``UNKNOWN_SERVER``, ``UPSTREAM_UNREACHABLE``, ``UPSTREAM_TIMEOUT``,
``UPSTREAM_INVALID``, message starting with "obsmask gateway:", the request's
id echoed, HTTP 200 when the request had an id, else 404/502/504 and
``"id": null``.

The server (tests/clients/mcp_server.py, ``MCPServer`` over streamable HTTP,
once answering with SSE and once with ``--json-response``) and the client
(tests/clients/mcp_client.py, ``mcp.Client``) run in the clients' virtual
environment, ``OBSMASK_CLIENTS_PYTHON``; scripts/test.py sets it. What the
client gets through the proxy is compared with what the same client gets
from the same server directly.

The client uses the initialize handshake (``mode="legacy"``): with the SDK's
own default (``mode="auto"``, protocol 2026-07-28) the SDK's server answers a
quick request with ``application/json`` even when it runs in SSE mode, so the
SSE path would not be tested. One test runs the default mode on top.

A third server runs the legacy HTTP+SSE transport (MCP 2024-11-05;
``MCPServer.sse_app``, the client's ``sse_client``): the client opens a GET
stream on ``/sse`` that never ends, its first event (``event: endpoint``)
names the URL to POST to, every POST is answered ``202 Accepted`` and every
result arrives as an ``event: message`` on the GET stream (the SDK still
negotiates protocol 2025-11-25 over it). Such streams must be rewritten
while streaming, event by event, without buffering the whole stream: the
response hook would only see one once it ends. It goes through
mitmdump in reverse mode only: the gateway route cannot carry it (the
endpoint event sends the client's POSTs to ``/messages/`` on the proxy, off
the route).

A tool may ask the client a question in the middle of its call (the SDK's
``ctx.elicit``): on the SSE server, the ``elicitation/create`` request comes
as an event on the pending ``tools/call`` stream, and the tool goes on only
once the client has POSTed its answer. The gateway route used to hold that
stream until it ended, which it never did: the client never saw the
question. One run through the gateway (to the SSE server, under a name of
its own, ``elicit``, so that its cut line is told from the shared runs')
checks it, against the same run without proxy.
"""

from __future__ import annotations

import http.client
import http.server
import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from obsmask_core.gateway.errors import (
    UNKNOWN_SERVER,
    UPSTREAM_INVALID,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNREACHABLE,
)
from obsmask_core.gateway.upstreams import DEFAULT_TIMEOUT_SECONDS
from support.agents import CLIENTS, CLIENTS_PYTHON, client_env, needs_clients
from support.mcp_servers import McpServer, start_mcp_server
from support.processes import REPO, MitmdumpProcess, running_mitmdump

pytestmark = [pytest.mark.e2e, needs_clients]

SERVER = CLIENTS / "mcp_server.py"
CLIENT = CLIENTS / "mcp_client.py"
# The streamable HTTP server, answering with SSE or with JSON.
VARIANTS = ("sse", "json")
# The legacy HTTP+SSE transport: every result on a GET stream that never ends.
LEGACY = "legacy-sse"
SERVER_VARIANTS = (*VARIANTS, LEGACY)
ROUTES = ("reverse", "gateway", "gateway-toml")
ROUTE_VARIANTS = [
    *(pytest.param(r, v, id=f"{r}-{v}") for r in ROUTES for v in VARIANTS),
    pytest.param("reverse", LEGACY, id=f"reverse-{LEGACY}"),
]
BIG_CHARS = 100_000
MARKER_TEMPLATE = (
    "\n... [OBSMASK_TRUNCATED original_chars={original_chars} head={head} tail={tail}] ...\n"
)
DEFAULT_HEAD, DEFAULT_TAIL = 2000, 2000
# The limits of the TOML file of the "gateway-toml" route: they show that
# [mcp_gateway.masking] is read along with [mcp_gateway.servers].
TOML_MAX, TOML_HEAD, TOML_TAIL = 3000, 1000, 1500
GATEWAY_TIMEOUT = 2
CLIENT_TIMEOUT = 20.0  # the client's bound of every request (the run: 5 of them)
PROCESS_TIMEOUT = 120.0
EVENT_STREAM = "text/event-stream"
# The elicitation run (tests/clients/mcp_server.py's confirm(), the client's
# --elicit-url): the gateway's name of the SSE server for it, the question,
# the client's fixed answer, the long string after it, and the bound of the
# call (a few tens of milliseconds without proxy; the gateway's own timeout
# is DEFAULT_TIMEOUT_SECONDS, the client's CLIENT_TIMEOUT).
ELICIT_SERVER = "elicit"
CONFIRM_MESSAGE = "obsmask e2e: confirm the long answer?"
ELICIT_ANSWER = "yes, obsmask-elicited-answer-42"
CONFIRM_CHARS = 10_000
ELICIT_SECONDS = 5.0


# Processes -------------------------------------------------------------------


def start_server(variant: str, log: Path) -> McpServer:
    """Start tests/clients/mcp_server.py in one of its variants."""
    arguments = {"json": ["--json-response"], LEGACY: ["--transport", "sse"]}.get(variant, [])
    return start_mcp_server(SERVER, arguments, variant, log)


def start_mitmdumps(stack: ExitStack, commands: dict[str, tuple[list[str], Path]]
                    ) -> dict[str, MitmdumpProcess]:
    """Several mitmdumps started at once (each stopped when ``stack`` closes)."""
    started: dict[str, MitmdumpProcess] = {}
    for name, (arguments, confdir) in commands.items():
        started[name] = proxy = MitmdumpProcess(arguments, REPO, confdir)
        stack.callback(proxy.stop)
    for proxy in started.values():
        proxy.wait_until_listening()
    return started


def run_clients(
    urls: list[str],
    *,
    expect_error: bool = False,
    mode: str = "legacy",
    proxies: Sequence[MitmdumpProcess] = (),
    elicit_urls: Sequence[str] = (),
) -> list[dict[str, Any] | AssertionError]:
    """tests/clients/mcp_client.py on ``urls``, then (``--elicit-url``) the
    elicitation run on ``elicit_urls``, one after the other in one process:
    each run's JSON report, or a failure holding its traceback (a pydantic
    ValidationError would show there) and mitmdump's output."""
    assert CLIENTS_PYTHON is not None
    command = [CLIENTS_PYTHON, str(CLIENT), "--mode", mode, "--timeout", str(CLIENT_TIMEOUT)]
    for url in urls:
        command += ["--url", url]
    for url in elicit_urls:
        command += ["--elicit-url", url]
    if expect_error:
        command.append("--expect-error")
    count = len(urls) + len(elicit_urls)
    done = subprocess.run(
        command,
        cwd=REPO,
        env=client_env(),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=PROCESS_TIMEOUT * count,
        check=False,
    )
    outputs = "".join(f"\nmitmdump's output:\n{proxy.output()}" for proxy in proxies)
    try:
        printed = json.loads(done.stdout)
        runs = printed["runs"] if count > 1 else [printed]
    except (ValueError, KeyError):
        raise AssertionError(
            f"the MCP client failed ({done.returncode}) on {urls}:\n{done.stderr}{outputs}"
        ) from None
    return [
        run if run["ok"] else AssertionError(
            f"the MCP client failed on {run['url']}:\n{run['traceback']}\n"
            f"HTTP exchanges: {run['exchanges']}{outputs}"
        )
        for run in runs
    ]


def run_client(
    url: str,
    *,
    expect_error: bool = False,
    mode: str = "legacy",
    proxy: MitmdumpProcess | None = None,
) -> dict[str, Any]:
    """One run of the client: its report, or the failure raised."""
    (outcome,) = run_clients(
        [url], expect_error=expect_error, mode=mode, proxies=[proxy] if proxy else []
    )
    if isinstance(outcome, AssertionError):
        raise outcome
    return outcome


def _free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def silent_server() -> Iterator[int]:
    """A TCP server that accepts connections and never answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for connection in accepted:
            connection.close()


HTML_PAGE = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>"


class HtmlHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request with an HTML page: 502 on /bad-gateway, else 200."""

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(502 if self.path.startswith("/bad-gateway") else 200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(HTML_PAGE)))
        self.end_headers()
        self.wfile.write(HTML_PAGE)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def html_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HtmlHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# Fixtures --------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, McpServer]]:
    logs = tmp_path_factory.mktemp("mcp-servers")
    with ExitStack() as stack:
        started: dict[str, McpServer] = {}
        for variant in SERVER_VARIANTS:
            started[variant] = server = start_server(variant, logs / f"{variant}.log")
            stack.callback(server.stop)
        for server in started.values():
            server.wait_until_listening()
        yield started


def _empty_config(directory: Path) -> Path:
    config = directory / "empty.toml"
    config.write_text("")
    return config


@dataclass
class Route:
    """A way through mitmdump to the servers, and its limits."""

    proxy: MitmdumpProcess
    urls: dict[str, str]
    head: int = DEFAULT_HEAD
    tail: int = DEFAULT_TAIL


@pytest.fixture(scope="module")
def routes(
    servers: dict[str, McpServer], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Route]]:
    """One mitmdump per server in reverse mode, one gateway with its servers
    (the streamable HTTP ones, and the SSE one once more as ``elicit``) given
    by --set, one with them given in a TOML file, and, for the counter-test,
    one per server in reverse mode with mcpmask_enabled=false; all started at
    once."""
    work = tmp_path_factory.mktemp("mcp-routes")
    empty = _empty_config(work)
    toml = work / "gateway.toml"
    toml.write_text(
        "[mcp_gateway]\n"
        "timeout_seconds = 30\n\n"
        "[mcp_gateway.servers]\n"
        + "".join(f'{variant} = "{servers[variant].url}"\n' for variant in VARIANTS)
        + "\n[mcp_gateway.masking]\n"
        f"max_chars = {TOML_MAX}\nhead_chars = {TOML_HEAD}\ntail_chars = {TOML_TAIL}\n",
        encoding="utf-8",
    )
    commands: dict[str, tuple[list[str], Path]] = {}
    for variant in SERVER_VARIANTS:
        commands[f"reverse-{variant}"] = (
            [
                "--mode", f"reverse:http://127.0.0.1:{servers[variant].port}",
                "--set", f"obsmask_config={empty}",
            ],
            work / f"confdir-reverse-{variant}",
        )
        commands[f"disabled-{variant}"] = (
            [
                "--mode", f"reverse:http://127.0.0.1:{servers[variant].port}",
                "--set", f"obsmask_config={empty}",
                "--set", "mcpmask_enabled=false",
            ],
            work / f"confdir-disabled-{variant}",
        )
    gateway_servers: list[str] = []
    for variant in VARIANTS:
        named = f"{variant}={servers[variant].url}"
        gateway_servers += ["--set", f"mcpmask_gateway_servers={named}"]
    gateway_servers += ["--set", f"mcpmask_gateway_servers={ELICIT_SERVER}={servers['sse'].url}"]
    commands["gateway"] = (
        ["--set", f"obsmask_config={empty}", *gateway_servers], work / "confdir-gateway"
    )
    commands["gateway-toml"] = (["--set", f"obsmask_config={toml}"], work / "confdir-toml")
    with ExitStack() as stack:
        proxies = start_mitmdumps(stack, commands)
        out = {
            f"{kind}-{v}": Route(
                proxies[f"{kind}-{v}"],
                {v: f"http://127.0.0.1:{proxies[f'{kind}-{v}'].port}{servers[v].path}"},
            )
            for kind in ("reverse", "disabled")
            for v in SERVER_VARIANTS
        }
        out["gateway"] = Route(proxies["gateway"], _gateway_urls(proxies["gateway"]))
        out["gateway-toml"] = Route(
            proxies["gateway-toml"], _gateway_urls(proxies["gateway-toml"]), TOML_HEAD, TOML_TAIL
        )
        yield out


def _gateway_urls(proxy: MitmdumpProcess) -> dict[str, str]:
    return {v: f"http://127.0.0.1:{proxy.port}/api/mcp-gateway/{v}/rpc" for v in VARIANTS}


@dataclass
class Run:
    """One client run through a route: its report and mitmdump's lines meanwhile."""

    report: dict[str, Any]
    cut_lines: list[str]
    route: Route


def _cut_lines(
    proxy: MitmdumpProcess, start: int, path: str = "", timeout: float = 5.0
) -> list[str]:
    """mitmdump's "cut" lines about ``path`` from index ``start`` on, once
    there is one (or ``timeout`` has passed)."""

    def found() -> list[str]:
        return [
            line for line in list(proxy.lines[start:])
            if "obsmask: MCP" in line and " cut" in line and path in line
        ]

    deadline = time.monotonic() + timeout
    while not found() and time.monotonic() < deadline:
        time.sleep(0.05)
    if found():
        time.sleep(0.2)  # a second line, if any, comes with the first
    return found()


Runs = dict[tuple[str, str], Run | AssertionError]


@dataclass
class ElicitRuns:
    """The elicitation run (confirm()) directly to the SSE server, and
    through the gateway under the name ``elicit``."""

    direct: dict[str, Any] | AssertionError
    gateway: Run | AssertionError


Batch = tuple[dict[str, dict[str, Any] | AssertionError], Runs, ElicitRuns]


@pytest.fixture(scope="module")
def batch(servers: dict[str, McpServer], routes: dict[str, Route]) -> Batch:
    """One client process for every run the shared tests read: directly to
    each server, and through every route to every server; then the
    elicitation run, directly and through the gateway."""
    direct_urls = {variant: server.url for variant, server in servers.items()}
    through: dict[tuple[str, str], Route] = {}
    for route in (*ROUTES, "disabled"):
        for variant in VARIANTS:
            name = f"{route}-{variant}" if route in ("reverse", "disabled") else route
            through[route, variant] = routes[name]
    for route in ("reverse", "disabled"):
        through[route, LEGACY] = routes[f"{route}-{LEGACY}"]
    gateway = routes["gateway"]
    elicit_path = f"/api/mcp-gateway/{ELICIT_SERVER}/rpc"
    elicit_urls = [servers["sse"].url, f"http://127.0.0.1:{gateway.proxy.port}{elicit_path}"]
    starts = {id(route.proxy): len(route.proxy.lines) for route in routes.values()}
    outcomes = run_clients(
        [*direct_urls.values(), *(route.urls[v] for (_, v), route in through.items())],
        proxies=list({id(r.proxy): r.proxy for r in routes.values()}.values()),
        elicit_urls=elicit_urls,
    )
    outcomes, (elicit_direct, elicit_gateway) = outcomes[:-2], outcomes[-2:]
    direct = dict(zip(direct_urls, outcomes[: len(direct_urls)], strict=True))
    runs: Runs = {}
    # Every run is over: a missing line has had the client's exit to come,
    # so the runs share one short wait.
    deadline = time.monotonic() + 3.0
    proxied = zip(through.items(), outcomes[len(direct_urls) :], strict=True)
    for ((name, variant), route), outcome in proxied:
        if isinstance(outcome, AssertionError):
            runs[name, variant] = outcome
            continue
        path = urlsplit(route.urls[variant]).path
        wait = 0.5 if name == "disabled" else max(0.0, deadline - time.monotonic())
        cut_lines = _cut_lines(route.proxy, starts[id(route.proxy)], path, wait)
        runs[name, variant] = Run(outcome, cut_lines, route)
    if not isinstance(elicit_gateway, AssertionError):
        wait = max(0.0, deadline - time.monotonic())
        cut_lines = _cut_lines(gateway.proxy, starts[id(gateway.proxy)], elicit_path, wait)
        elicit_gateway = Run(elicit_gateway, cut_lines, gateway)
    return direct, runs, ElicitRuns(elicit_direct, elicit_gateway)


@pytest.fixture(scope="module")
def direct(batch: Batch) -> dict[str, dict[str, Any]]:
    """What the client gets from each server without any proxy: the expected values."""
    reports: dict[str, dict[str, Any]] = {}
    for variant, report in batch[0].items():
        if isinstance(report, AssertionError):
            raise report
        big = report["calls"]["big_text"]["content"][0]["text"]
        assert len(big) == BIG_CHARS and big.startswith("HEAD-") and big.endswith("-TAIL")
        image = report["calls"]["image"]["content"][0]
        assert image["data_length"] >= 8000, "the image must be longer than max_chars"
        if variant == LEGACY:
            # The GET stream first, then POSTs answered 202 with no content type.
            assert report["transport"] == "sse"
            stream, *posts = report["exchanges"]
            assert (stream["method"], stream["path"]) == ("GET", "/sse"), stream
            assert {e["method"] for e in posts} == {"POST"}, posts
            assert {e["status"] for e in posts} == {202}, posts
        expected = {"sse": EVENT_STREAM, "json": "application/json", LEGACY: EVENT_STREAM}
        answers = {t.split(";")[0] for t in _answer_types(report)}
        assert answers == {expected[variant]}, f"the {variant} server answers {answers}"
        reports[variant] = report
    return reports


@pytest.fixture(scope="module")
def runs(batch: Batch) -> Runs:
    """The client's runs through every route to every server, by (route, variant)."""
    return batch[1]


@pytest.fixture(scope="module")
def elicit_runs(batch: Batch) -> ElicitRuns:
    """The elicitation run, directly and through the gateway."""
    return batch[2]


def _run(runs: Runs, route: str, variant: str) -> Run:
    """A run of the ``runs`` fixture; its failure, raised in the test that reads it."""
    run = runs[route, variant]
    if isinstance(run, AssertionError):
        raise run
    return run


def _tool_calls(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in report["exchanges"] if e["rpc_method"] == "tools/call"]


def _answer_types(report: dict[str, Any]) -> list[str]:
    """The Content-Types the tool results came with: of the tools/call POSTs,
    or, on the legacy transport, of the GET stream (its POSTs are answered
    202 with no content type, and the last 202 may still be on its way when
    the client, its result in hand, leaves)."""
    if report["transport"] == "sse":
        return [e["content_type"] for e in report["exchanges"] if e["method"] == "GET"]
    return [e["content_type"] for e in _tool_calls(report)]


def _expected_cut(original: str, head: int, tail: int) -> str:
    marker = MARKER_TEMPLATE.format(original_chars=len(original), head=head, tail=tail)
    return original[:head] + marker + original[-tail:]


# Truncation through mitmdump -------------------------------------------------


@pytest.mark.parametrize(("route", "variant"), ROUTE_VARIANTS)
def test_a_tool_returning_100000_chars_arrives_truncated_with_the_marker(
    route: str, variant: str, runs: Runs, direct: dict[str, Any]
) -> None:
    run = _run(runs, route, variant)
    original = direct[variant]["calls"]["big_text"]["content"][0]["text"]
    call = run.report["calls"]["big_text"]
    assert call["isError"] is False
    assert len(call["content"]) == 1 and call["content"][0]["type"] == "text"
    text = call["content"][0]["text"]
    head, tail = run.route.head, run.route.tail
    assert text.startswith(original[:head]), text[: head + 200]
    assert text.endswith(original[-tail:]), text[-tail - 200 :]
    marker = MARKER_TEMPLATE.format(original_chars=BIG_CHARS, head=head, tail=tail)
    assert marker in text, text[head - 50 : head + 200]
    assert text == _expected_cut(original, head, tail)
    # Visible in mitmdump's output: one line for the one message cut.
    assert len(run.cut_lines) == 1, run.route.proxy.output()[-5000:]
    if route == "reverse":
        # The answers came through as the server wrote them: SSE stayed SSE.
        assert _answer_types(run.report) == _answer_types(direct[variant])


@pytest.mark.parametrize(("route", "variant"), ROUTE_VARIANTS)
def test_a_tool_returning_an_image_arrives_with_its_base64_intact(
    route: str, variant: str, runs: Runs, direct: dict[str, Any]
) -> None:
    calls = _run(runs, route, variant).report["calls"]
    expected = direct[variant]["calls"]
    assert calls["image"]["isError"] is False
    # data length, SHA-256 of the base64 and MIME type as sent without proxy
    assert calls["image"]["content"] == expected["image"]["content"]
    assert calls["image"]["content"][0]["mimeType"] == "image/png"
    # And the small tool's text, under every limit, is untouched too.
    assert calls["small"]["content"] == expected["small"]["content"]


@pytest.mark.parametrize(("route", "variant"), ROUTE_VARIANTS)
def test_tools_list_is_unchanged(
    route: str, variant: str, runs: Runs, direct: dict[str, Any]
) -> None:
    report = _run(runs, route, variant).report
    assert report["tools"] == direct[variant]["tools"]
    names = [t["name"] for t in report["tools"]["tools"]]
    assert names == ["big_text", "image", "small", "confirm"]
    assert report["protocol_version"] == direct[variant]["protocol_version"]


@pytest.mark.parametrize(("route", "variant"), ROUTE_VARIANTS)
def test_the_client_raises_no_validation_error(
    route: str, variant: str, runs: Runs
) -> None:
    """run_client fails with the client's traceback on any exception (a
    pydantic ValidationError included); here every step also succeeded."""
    run = _run(runs, route, variant)
    assert set(run.report["calls"]) == {"big_text", "image", "small"}
    assert not any(call["isError"] for call in run.report["calls"].values())
    assert all(e["status"] < 400 for e in run.report["exchanges"]), run.report["exchanges"]
    output = run.route.proxy.output()
    assert "Traceback" not in output
    assert "internal error" not in output


def test_the_sdk_default_mode_works_through_the_reverse_proxy(
    routes: dict[str, Route], servers: dict[str, McpServer]
) -> None:
    """``mode="auto"``: server/discover, then the 2026-07-28 protocol."""
    route = routes["reverse-sse"]
    start = len(route.proxy.lines)
    expected, report = run_clients(
        [servers["sse"].url, route.urls["sse"]], mode="auto", proxies=[route.proxy]
    )
    if isinstance(expected, AssertionError):
        raise expected
    if isinstance(report, AssertionError):
        raise report
    assert report["exchanges"][0]["rpc_method"] == "server/discover"
    assert report["protocol_version"] == expected["protocol_version"]
    assert report["tools"] == expected["tools"]
    original = expected["calls"]["big_text"]["content"][0]["text"]
    text = report["calls"]["big_text"]["content"][0]["text"]
    assert text == _expected_cut(original, DEFAULT_HEAD, DEFAULT_TAIL)
    assert report["calls"]["image"]["content"] == expected["calls"]["image"]["content"]
    assert len(_cut_lines(route.proxy, start)) == 1


# The legacy HTTP+SSE transport -----------------------------------------------

# obsmask's line per cut message: "obsmask: MCP response id=3 (GET /sse): cut
# 1 string, 100,000 -> 4,071 chars".
CUT_LINE = re.compile(
    r"obsmask: MCP response id=(\S+) \((\S+) ([^)]*)\): cut (\d+) strings?, "
    r"([\d,]+) -> ([\d,]+) chars"
)
# mitmdump's own line for a flow, printed when it ends.
GET_SSE_FLOW = re.compile(r"GET http://127\.0\.0\.1:\d+/sse\b")


def test_the_legacy_transport_result_is_cut_on_its_never_ending_get_stream(
    runs: Runs, direct: dict[str, Any]
) -> None:
    """The 100,000 chars come back as an ``event: message`` on GET /sse, a
    stream that ends only when the client leaves, its POSTs answered 202:
    mitmdump logs the cut for the GET /sse flow, with the id of the
    big_text call, while that stream is still open."""
    run = _run(runs, "reverse", LEGACY)
    stream, *posts = run.report["exchanges"]
    assert (stream["method"], stream["path"], stream["status"]) == ("GET", "/sse", 200)
    assert stream["content_type"].startswith(EVENT_STREAM)
    assert {(e["method"], e["path"], e["status"]) for e in posts} == {
        ("POST", "/messages/", 202)
    }, posts
    lines = list(run.route.proxy.lines)
    output = "\n".join(lines)
    cuts = [(index, CUT_LINE.search(line)) for index, line in enumerate(lines)]
    cuts = [(index, match) for index, match in cuts if match is not None]
    assert len(cuts) == 1, output  # one line for the one message cut
    ((index, cut),) = cuts
    (big_call,) = [e for e in _tool_calls(run.report) if e["tool"] == "big_text"]
    original = direct[LEGACY]["calls"]["big_text"]["content"][0]["text"]
    after = len(_expected_cut(original, DEFAULT_HEAD, DEFAULT_TAIL))
    assert cut.groups() == (
        str(big_call["rpc_id"]), "GET", "/sse", "1", f"{BIG_CHARS:,}", f"{after:,}"
    ), output
    # mitmdump prints a flow when it ends: the GET stream's line, if it is
    # there yet, comes after the cut. Buffered, the stream would have had
    # to end first, and the client would have had no result.
    ends = [i for i, line in enumerate(lines) if GET_SSE_FLOW.search(line)]
    assert all(end > index for end in ends), output


# A tool that asks the client mid-call, through the gateway ---------------------


def test_a_tool_eliciting_an_answer_mid_call_gets_it_through_the_gateway(
    elicit_runs: ElicitRuns,
) -> None:
    """text/event-stream answers are rewritten while they stream, event by
    event, without buffering the whole stream and without delaying events.

    confirm() asks the client (``ctx.elicit``) in the middle of its call: the
    ``elicitation/create`` request is an event of the ``tools/call`` stream,
    and the tool ends only once the client has POSTed its answer. Held
    whole by the gateway, that stream never gave the client the question:
    the call hung until a timeout. Through ``/api/mcp-gateway/elicit/rpc``
    (the SSE server), as directly: the callback ran once, with the server's
    question; its answer was POSTed (202) after the call's stream had
    begun; the result carries the accepted answer; the long string after it
    arrived cut with the marker (one cut line in mitmdump's output, for that
    call on that path); and the call took well under the gateway's timeout."""
    direct = elicit_runs.direct
    if isinstance(direct, AssertionError):
        raise direct
    run = elicit_runs.gateway
    if isinstance(run, AssertionError):
        raise run
    assert ELICIT_SECONDS < CLIENT_TIMEOUT < DEFAULT_TIMEOUT_SECONDS
    for report in (direct, run.report):
        (asked,) = report["elicitations"]  # the callback ran, once
        assert asked["mode"] == "form", asked
        assert asked["message"] == CONFIRM_MESSAGE, asked
        assert asked["requested_schema"]["properties"]["answer"]["type"] == "string", asked
        call = report["calls"]["confirm"]
        assert call["isError"] is False, call
        (block,) = call["content"]
        assert block["type"] == "text"
        assert block["text"].startswith(f"confirmed: {ELICIT_ANSWER}\n"), block["text"][:200]
        # The question reached the client while the call's stream was open,
        # and its answer went back as a POST of its own.
        exchanges = report["exchanges"]
        (tool_call,) = _tool_calls(report)
        assert tool_call["status"] == 200, exchanges
        assert tool_call["content_type"].startswith(EVENT_STREAM), exchanges
        answers = [
            e for e in exchanges
            if e["method"] == "POST" and e["rpc_method"] is None
            and e["rpc_id"] == asked["request_id"]
        ]
        assert [e["status"] for e in answers] == [202], exchanges
        assert exchanges.index(tool_call) < exchanges.index(answers[0]), exchanges
        assert 0 <= asked["after"] < call["seconds"] < ELICIT_SECONDS, (asked, call["seconds"])
    # Through the gateway, the same question and the answer, its long part cut.
    original = direct["calls"]["confirm"]["content"][0]["text"]
    assert len(original) == len(f"confirmed: {ELICIT_ANSWER}\n") + CONFIRM_CHARS
    assert original.endswith("-TAIL") and "OBSMASK_TRUNCATED" not in original
    ignored = ("after", "request_id")
    (through,), (expected,) = run.report["elicitations"], direct["elicitations"]
    assert {k: v for k, v in through.items() if k not in ignored} == {
        k: v for k, v in expected.items() if k not in ignored
    }
    text = run.report["calls"]["confirm"]["content"][0]["text"]
    marker = MARKER_TEMPLATE.format(
        original_chars=len(original), head=DEFAULT_HEAD, tail=DEFAULT_TAIL
    )
    assert marker in text, text[DEFAULT_HEAD - 50 : DEFAULT_HEAD + 200]
    assert text == _expected_cut(original, DEFAULT_HEAD, DEFAULT_TAIL)
    output = run.route.proxy.output()
    assert len(run.cut_lines) == 1, output[-5000:]
    cut = CUT_LINE.search(run.cut_lines[0])
    assert cut is not None, run.cut_lines
    (tool_call,) = _tool_calls(run.report)
    assert cut.groups() == (
        str(tool_call["rpc_id"]), "POST", f"/api/mcp-gateway/{ELICIT_SERVER}/rpc", "1",
        f"{len(original):,}", f"{len(text):,}",
    ), run.cut_lines
    assert "Traceback" not in output


# The counter-test ------------------------------------------------------------


@pytest.mark.parametrize("variant", SERVER_VARIANTS)
def test_with_mcpmask_disabled_the_100000_chars_arrive_whole(
    variant: str, runs: Runs, direct: dict[str, Any]
) -> None:
    """``--set mcpmask_enabled=false``, in reverse mode: everything as sent
    (and the legacy transport's GET stream still streams: held whole, it would
    never reach the client)."""
    run = _run(runs, "disabled", variant)
    calls = run.report["calls"]
    text = calls["big_text"]["content"][0]["text"]
    assert "OBSMASK_TRUNCATED" not in text
    assert len(text) == BIG_CHARS
    assert text == direct[variant]["calls"]["big_text"]["content"][0]["text"]
    assert calls["image"]["content"] == direct[variant]["calls"]["image"]["content"]
    assert run.report["tools"] == direct[variant]["tools"]
    assert run.cut_lines == []
    assert "Traceback" not in run.route.proxy.output()


# Gateway failures ------------------------------------------------------------

FAILURES = [
    pytest.param("nowhere", UNKNOWN_SERVER, id="unknown-server"),
    pytest.param("refused", UPSTREAM_UNREACHABLE, id="connection-refused"),
    pytest.param("silent", UPSTREAM_TIMEOUT, id="never-answers"),
    pytest.param("html502", UPSTREAM_INVALID, id="html-502-page"),
    pytest.param("html200", UPSTREAM_INVALID, id="html-200-page"),
]
NO_ID_STATUS = {UNKNOWN_SERVER: 404, UPSTREAM_UNREACHABLE: 502, UPSTREAM_TIMEOUT: 504,
                UPSTREAM_INVALID: 502}


@pytest.fixture(scope="module")
def failing_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MitmdumpProcess]:
    """A gateway whose servers all fail, each its own way; its timeout 2 s."""
    work = tmp_path_factory.mktemp("mcp-failures")
    with ExitStack() as stack:
        silent = stack.enter_context(silent_server())
        html = stack.enter_context(html_server())
        servers = {
            "refused": f"http://127.0.0.1:{_free_port()}/mcp",
            "silent": f"http://127.0.0.1:{silent}/mcp",
            "html502": f"http://127.0.0.1:{html}/bad-gateway",
            "html200": f"http://127.0.0.1:{html}/ok-page",
        }
        arguments = ["--set", f"obsmask_config={_empty_config(work)}",
                     "--set", f"mcpmask_gateway_timeout={GATEWAY_TIMEOUT}"]
        for name, url in servers.items():
            arguments += ["--set", f"mcpmask_gateway_servers={name}={url}"]
        yield stack.enter_context(running_mitmdump(arguments, REPO, work / "confdir"))


def _gateway_url(proxy: MitmdumpProcess, name: str) -> str:
    return f"http://127.0.0.1:{proxy.port}/api/mcp-gateway/{name}/rpc"


@pytest.fixture(scope="module")
def sdk_failures(failing_gateway: MitmdumpProcess) -> dict[str, dict[str, Any] | AssertionError]:
    """The real client on each failing route (one process), by server name."""
    names = [param.values[0] for param in FAILURES]
    outcomes = run_clients(
        [_gateway_url(failing_gateway, name) for name in names],
        expect_error=True,
        proxies=[failing_gateway],
    )
    return dict(zip(names, outcomes, strict=True))


@pytest.mark.parametrize(("name", "code"), FAILURES)
def test_a_gateway_failure_reaches_the_sdk_client_as_a_json_rpc_error(
    name: str,
    code: int,
    sdk_failures: dict[str, dict[str, Any] | AssertionError],
    failing_gateway: MitmdumpProcess,
) -> None:
    """The real client's initialize fails with the gateway's code (MCPError)."""
    report = sdk_failures[name]
    if isinstance(report, AssertionError):
        raise report
    assert report["error"]["code"] == code, report
    assert report["error"]["message"].startswith("obsmask gateway:"), report
    assert [e["rpc_method"] for e in report["exchanges"]] == ["initialize"]
    assert report["exchanges"][0]["status"] == 200
    assert report["exchanges"][0]["content_type"].startswith("application/json")
    if code == UPSTREAM_TIMEOUT:
        assert GATEWAY_TIMEOUT * 0.9 <= report["seconds"] < CLIENT_TIMEOUT
    assert "Traceback" not in failing_gateway.output()


def test_the_sdk_default_mode_also_surfaces_the_gateway_error(
    failing_gateway: MitmdumpProcess,
) -> None:
    """``mode="auto"``: the discover probe's error makes the SDK fall back to
    initialize, whose error it raises."""
    report = run_client(_gateway_url(failing_gateway, "refused"), expect_error=True,
                        mode="auto", proxy=failing_gateway)
    assert report["error"]["code"] == UPSTREAM_UNREACHABLE, report
    assert [e["rpc_method"] for e in report["exchanges"]] == ["server/discover", "initialize"]


def _post(port: int, path: str, payload: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    """A raw POST from the test process: status, Content-Type, JSON body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(
            "POST",
            path,
            body=json.dumps(payload).encode(),
            headers={
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            },
        )
        response = connection.getresponse()
        body = response.read()
        return response.status, response.headers.get("content-type", ""), json.loads(body)
    finally:
        connection.close()


INITIALIZE = {
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    },
}


@pytest.mark.parametrize(("name", "code"), FAILURES)
@pytest.mark.parametrize("request_id", [7, "req-abc"], ids=["int-id", "str-id"])
def test_a_gateway_failure_on_the_wire_echoes_the_request_id(
    name: str, code: int, request_id: int | str, failing_gateway: MitmdumpProcess
) -> None:
    """The same failures read with a raw POST: HTTP 200, JSON-RPC 2.0 error,
    the request's id echoed as sent."""
    path = f"/api/mcp-gateway/{name}/rpc"
    status, content_type, body = _post(
        failing_gateway.port, path, {"jsonrpc": "2.0", "id": request_id, **INITIALIZE}
    )
    assert status == 200, body
    assert content_type.startswith("application/json")
    assert body["jsonrpc"] == "2.0"
    assert body["id"] == request_id and type(body["id"]) is type(request_id)
    assert "result" not in body
    assert body["error"]["code"] == code
    assert body["error"]["message"].startswith("obsmask gateway:")


@pytest.mark.parametrize(("name", "code"), FAILURES)
def test_a_gateway_failure_on_a_notification_has_a_null_id(
    name: str, code: int, failing_gateway: MitmdumpProcess
) -> None:
    """No id to echo: an HTTP error status and ``"id": null``."""
    path = f"/api/mcp-gateway/{name}/rpc"
    status, content_type, body = _post(
        failing_gateway.port, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert status == NO_ID_STATUS[code], body
    assert content_type.startswith("application/json")
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == code
    assert body["error"]["message"].startswith("obsmask gateway:")


@pytest.mark.parametrize(
    ("name", "code"),
    [pytest.param("nowhere", UNKNOWN_SERVER, id="unknown-server"),
     pytest.param("refused", UPSTREAM_UNREACHABLE, id="connection-refused")],
)
@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_gateway_failure_on_get_and_delete_has_an_error_status(
    method: str, name: str, code: int, failing_gateway: MitmdumpProcess
) -> None:
    """The client's GET stream and its DELETE carry no id either."""
    connection = http.client.HTTPConnection("127.0.0.1", failing_gateway.port, timeout=30)
    try:
        connection.request(
            method, f"/api/mcp-gateway/{name}/rpc", headers={"accept": EVENT_STREAM}
        )
        response = connection.getresponse()
        body = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == NO_ID_STATUS[code], body
    assert response.headers.get("content-type", "").startswith("application/json")
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == code
    assert body["error"]["message"].startswith("obsmask gateway:")
