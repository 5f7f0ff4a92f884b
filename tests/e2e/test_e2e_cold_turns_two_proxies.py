"""End to end: cold turns behind two proxies that share one Redis server.

Two real mitmdump processes with obsmask share one real redis-server
(``[recall] store``, its table of when conversations were last seen with
it), in front of one caching stub (tests/support/scripted_anthropic.py).
The real ``anthropic`` SDK agent (tests/support/anthropic_shell_agent.py)
sends its requests to the two proxies in turn, as a load balancer would,
two seconds apart (its tool takes that long), with obsmask told a
lifetime of six seconds (``cold_after_seconds = 6``: four seconds of slack
for a slow or busy machine): through the pair the conversation is never
paused that long, through either proxy alone it is every time.

Checked:
- with Redis up, no request is taken for cold but the one after a real
  pause of twelve seconds, whichever proxy serves it;
- with Redis stopped, no request is taken for cold at all (each proxy
  knows only the requests it saw, and a request whose previous one it did
  not see begins a conversation it knows nothing of): losing the table
  only loses savings. (Keyed by the first user message, as before,
  each proxy took every request it served for cold.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from mitmproxy import http

from support.agents import clients_python, needs_clients
from support.anthropic_shell_agent import run_shell_agent
from support.flow_files import read_flows
from support.json_values import as_object
from support.processes import REPO, running_mitmdump
from support.redis_server import RedisServer, needs_redis, running_redis
from support.scripted_anthropic import scripted_anthropic

pytestmark = [pytest.mark.e2e, needs_clients, needs_redis]

PROMPT_MARKER = "OBSMASK-E2E-COLD-TWO-PROXIES"
PROMPT = f"{PROMPT_MARKER}: run the steps you are given. " + "Keep every log line. " * 1900
FINAL = "Scripted run done."
STEP_SECONDS = 2
PAUSE_SECONDS = 12
PAUSED_TURN = 5  # the request after 5 tool turns comes after the real pause
TURNS = 8
OPTIONS = ("--set", "obsmask_price_model=anthropic", "--set", "obsmask_allowance_percent=2",
           "--set", "obsmask_window_turns=1", "--set", "obsmask_min_free_percent=80",
           "--set", "obsmask_cold_after_seconds=6")


def _commands(pause: bool) -> list[str]:
    return [f"wait {PAUSE_SECONDS if pause and number == PAUSED_TURN - 1 else STEP_SECONDS} "
            f"emit 800 step{number}" for number in range(TURNS)]



@contextmanager
def two_proxies(tmp_path: Path, redis: RedisServer, upstream: str,
                prefix: str) -> Iterator[tuple[list[str], list[Path]]]:
    config = tmp_path / "empty.toml"
    config.write_text("", encoding="utf-8")  # the repository's mitm.toml must not count
    files = [tmp_path / f"{prefix}proxy{n}.mitm" for n in range(2)]
    with ExitStack() as stack:
        urls = []
        for number, flows in enumerate(files):
            proxy = stack.enter_context(running_mitmdump(
                ["--mode", f"reverse:{upstream}", "--set", f"obsmask_config={config}", *OPTIONS,
                 "--set", f"obsmask_recall_store={redis.url}",
                 "--set", f"obsmask_recall_store_key_prefix=e2e-cold-{prefix}:",
                 "--set", f"obsmask_recall_data_dir={tmp_path / 'no-sqlite-here'}",
                 "-w", str(flows)],
                REPO, tmp_path / f"confdir-{prefix}{number}"))
            urls.append(f"http://127.0.0.1:{proxy.port}")
        yield urls, files


def _bills(files: list[Path]) -> list[dict[str, object]]:
    """Every flow's bill, through both proxies, in the order they were sent."""
    flows: list[http.HTTPFlow] = sorted((f for path in files for f in read_flows(path)),
                                        key=lambda f: f.request.timestamp_start)
    assert len(flows) == TURNS + 1
    return [as_object(as_object(flow.metadata["obsmask"])["bill"]) for flow in flows]


def _run(tmp_path: Path, redis: RedisServer, prefix: str, pause: bool) -> list[bool]:
    """Which requests were billed cold."""
    with scripted_anthropic(PROMPT_MARKER, _commands(pause), FINAL) as scripted, \
            two_proxies(tmp_path, redis, scripted.url, prefix) as (urls, files):
        run_shell_agent(clients_python(), urls, PROMPT, breakpoint="last")
    return [bill["cold"] is True for bill in _bills(files)]


def test_alternate_requests_through_two_proxies_are_cold_only_after_a_real_pause(
    tmp_path: Path,
) -> None:
    with running_redis(tmp_path / "redis") as redis:
        cold = _run(tmp_path, redis, "up", pause=True)
    assert [n for n, is_cold in enumerate(cold) if is_cold] == [PAUSED_TURN], cold


def test_with_redis_stopped_nothing_is_taken_for_cold(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path / "redis")  # never started: out of reach from the start
    cold = _run(tmp_path, redis, "down", pause=False)
    assert not any(cold), cold
