"""``obsmask claude``, ``obsmask codex`` and ``obsmask run`` before anything
runs (launch/): which arguments are obsmask's and which the agent's, where
the traffic goes, and what each agent is given. The runs themselves, with
the real Claude Code, are tests/e2e/test_e2e_launch.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from obsmask_core.launch import command
from obsmask_core.launch.agents import any_program
from obsmask_core.launch.claude_code import CLAUDE, TOOL_SEARCH_VARIABLE
from obsmask_core.launch.codex import CODEX
from obsmask_core.launch.command import UsageError, parse
from obsmask_core.launch.proxy_process import ProxySpec
from obsmask_core.launch.upstream import AgentUpstream, UpstreamError

RECALL = "http://127.0.0.1:8123/obsmask/mcp"


def test_obsmask_options_come_first_and_the_first_other_argument_starts_the_agents():
    launch = parse(["--port", "8123", "--keep-proxy", "-p", "hello", "--port", "1"])
    assert launch.port == 8123
    assert launch.flags == {"--keep-proxy"}
    # A later --port is the agent's, like everything after its first argument.
    assert launch.rest == ("-p", "hello", "--port", "1")


def test_after_a_double_dash_every_argument_is_the_agents_even_one_named_like_ours():
    """Claude Code has a --settings option of its own."""
    launch = parse(["--settings", "mine.toml", "--", "--settings", "claude.json"])
    assert launch.values["--settings"] == "mine.toml"
    assert launch.rest == ("--settings", "claude.json")


def test_an_option_takes_its_value_after_an_equals_sign_too():
    assert parse(["--port=0", "--upstream=http://127.0.0.1:9/v1"]).values == {
        "--port": "0", "--upstream": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize("arguments", [["--port"], ["--port", "http"], ["--port", "70000"]])
def test_a_port_that_is_missing_or_not_a_port_is_refused(arguments):
    with pytest.raises(UsageError):
        parse(arguments).port  # noqa: B018 - the property reads the value


def test_help_is_obsmasks_only_before_the_agents_arguments():
    assert parse(["--help"]).help
    assert not parse(["-p", "--help"]).help
    assert parse(["--", "--help"]).rest == ("--help",)


@given(st.lists(st.text(min_size=1).filter(lambda a: not a.startswith("-")), max_size=5))
def test_arguments_that_are_not_options_all_go_to_the_agent_in_order(arguments):
    assert parse(arguments).rest == tuple(arguments)


def test_an_upstream_with_a_path_forwards_to_its_origin_and_the_agent_keeps_the_path():
    """mitmproxy's reverse mode takes an origin only."""
    upstream = AgentUpstream.parse("https://gateway.example.com:8443/openai/v1/")
    assert upstream.origin == "https://gateway.example.com:8443"
    assert upstream.path == "/openai/v1"
    assert upstream.through("127.0.0.1", 8123) == "http://127.0.0.1:8123/openai/v1"
    assert AgentUpstream.parse("https://api.anthropic.com").through("127.0.0.1", 1) == \
        "http://127.0.0.1:1"


@pytest.mark.parametrize("url", ["api.openai.com/v1", "ftp://host", "https://", "http://h/v1?x=1"])
def test_an_upstream_that_is_not_an_http_base_url_is_refused(url):
    with pytest.raises(UpstreamError):
        AgentUpstream.parse(url)


def test_the_upstream_is_the_programs_own_base_url_when_its_environment_sets_one():
    assert any_program("OPENAI_BASE_URL").upstream_url({}) == "https://api.openai.com/v1"
    assert any_program("OPENAI_BASE_URL").upstream_url({"OPENAI_BASE_URL": " gw "}) == "gw"


def test_claude_code_gets_the_proxy_as_base_url_and_tool_search_on_unless_the_user_chose(
    tmp_path, monkeypatch,
):
    monkeypatch.chdir(tmp_path)
    env = CLAUDE.environment({"HOME": str(tmp_path)}, "http://p")
    assert env["ANTHROPIC_BASE_URL"] == "http://p" and env[TOOL_SEARCH_VARIABLE] == "true"
    kept = CLAUDE.environment({"HOME": str(tmp_path), TOOL_SEARCH_VARIABLE: "false"}, "http://p")
    assert kept[TOOL_SEARCH_VARIABLE] == "false"


def test_behind_a_gateway_of_the_users_tool_search_stays_as_the_user_had_it(
    tmp_path, monkeypatch,
):
    """Claude Code turns tool search off for a gateway by itself: obsmask
    only undoes what its own proxy would cause."""
    monkeypatch.chdir(tmp_path)
    env = CLAUDE.environment({"HOME": str(tmp_path), "ANTHROPIC_BASE_URL": "https://gw"},
                             "http://p")
    assert TOOL_SEARCH_VARIABLE not in env and env["ANTHROPIC_BASE_URL"] == "http://p"


def test_the_agent_asks_no_proxy_of_the_users_for_the_loopback():
    env = CLAUDE.environment({"HOME": "/nowhere", "NO_PROXY": "corp.example",
                              "HTTPS_PROXY": "http://corp:3128"}, "http://p")
    assert env["NO_PROXY"] == "corp.example,127.0.0.1,localhost"
    assert env["no_proxy"] == "127.0.0.1,localhost"
    assert CODEX.environment({"no_proxy": "127.0.0.1"}, "http://p")["no_proxy"] == \
        "127.0.0.1,localhost"


def test_a_base_url_in_claude_codes_own_settings_is_the_upstream_and_is_overridden(
    tmp_path, monkeypatch,
):
    """Claude Code's settings files win over its environment; its
    --settings wins over them."""
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://gw.example/anthropic"}}))
    monkeypatch.chdir(project)
    environ = {"HOME": str(tmp_path), "ANTHROPIC_BASE_URL": "https://ignored.example"}
    assert CLAUDE.upstream_url(environ) == "https://gw.example/anthropic"
    arguments = CLAUDE.arguments(["-p", "hi"], "http://p/anthropic", None, environ)
    assert arguments == ["-p", "hi", "--settings",
                         json.dumps({"env": {"ANTHROPIC_BASE_URL": "http://p/anthropic"}})]
    # The user's own --settings is left alone.
    assert CLAUDE.arguments(["--settings", "x.json"], "http://p", None, environ) == [
        "--settings", "x.json"]


def test_claude_codes_recall_server_comes_after_its_options_and_before_a_double_dash(
    tmp_path, monkeypatch,
):
    """--mcp-config takes several values: placed before a prompt it would
    swallow it."""
    monkeypatch.chdir(tmp_path)
    environ = {"HOME": str(tmp_path)}
    added = CLAUDE.arguments(["-p", "hi"], "http://p", RECALL, environ)
    assert added[:2] == ["-p", "hi"] and added[2] == "--mcp-config"
    servers = json.loads(added[3])["mcpServers"]
    assert servers == {"obsmask-recall": {"type": "http", "url": RECALL}}
    assert CLAUDE.arguments(["--x", "--", "prompt"], "http://p", RECALL, environ)[-2:] == [
        "--", "prompt"]
    assert CLAUDE.arguments(["-p", "hi"], "http://p", None, environ) == ["-p", "hi"]


def test_claude_codes_subcommands_get_none_of_a_sessions_options(tmp_path, monkeypatch):
    """claude mcp list --mcp-config ... is refused by Claude Code."""
    monkeypatch.chdir(tmp_path)
    assert CLAUDE.arguments(["mcp", "list"], "http://p", RECALL, {"HOME": str(tmp_path)}) == [
        "mcp", "list"]


def test_any_program_gets_the_variable_it_names():
    agent = any_program("MY_BASE")
    assert agent.environment({}, "http://p")["MY_BASE"] == "http://p"
    assert agent.upstream_url({}) == ""
    assert any_program("ANTHROPIC_BASE_URL").upstream_url({}) == "https://api.anthropic.com"


def test_the_proxy_is_a_reverse_proxy_on_the_loopback_with_the_settings_named():
    spec = ProxySpec("https://api.anthropic.com", 0, "my.toml", log=None)  # type: ignore[arg-type]
    line = spec.command()
    assert line[1:4] == ["-m", "obsmask_core.cli.main", "mitmdump"]
    assert ["--mode", "reverse:https://api.anthropic.com"] == line[4:6]
    assert line[6:] == ["--listen-host", "127.0.0.1", "--listen-port", "0",
                        "--set", "obsmask_config=my.toml"]


def test_a_missing_agent_is_one_line_saying_how_to_install_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert command.agent_main("claude", ["-p", "hi"]) == command.NOT_FOUND
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"obsmask: claude is not installed (not on PATH); install it with: "
                     f"{CLAUDE.install}"]
    assert command.agent_main("codex", []) == command.NOT_FOUND
    assert "npm install -g @openai/codex" in capsys.readouterr().err


def test_run_needs_a_command_and_somewhere_to_send_the_traffic(monkeypatch, capsys):
    monkeypatch.delenv("MY_BASE", raising=False)
    assert command.run_main([]) == command.FAILED
    assert "usage: obsmask run" in capsys.readouterr().err
    assert command.run_main(["--variable", "MY_BASE", "--", "true"]) == command.FAILED
    assert "MY_BASE is not set" in capsys.readouterr().err


def test_codex_is_pointed_at_the_proxy_by_its_config_override_not_a_variable():
    """Codex 0.171 ignores OPENAI_BASE_URL: the built-in provider reads
    openai_base_url."""
    environ = {"CODEX_HOME": "/nowhere"}
    arguments = CODEX.arguments(["exec", "hi"], "http://127.0.0.1:1/v1", RECALL, environ)
    assert arguments == ["-c", 'openai_base_url="http://127.0.0.1:1/v1"',
                         "-c", f'mcp_servers.obsmask-recall.url="{RECALL}"', "exec", "hi"]
    assert "OPENAI_BASE_URL" not in CODEX.environment({"HOME": "/h"}, "http://p")


def test_codex_with_a_model_provider_of_the_users_goes_through_that_providers_base_url(
    tmp_path,
):
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "my gw"\n[model_providers."my gw"]\nbase_url = "http://gw:1/v1"\n')
    environ = {"CODEX_HOME": str(home)}
    assert CODEX.upstream_url(environ) == "http://gw:1/v1"
    assert CODEX.arguments([], "http://p/v1", None, environ) == [
        "-c", 'model_providers."my gw".base_url="http://p/v1"']


def test_codexs_upstream_is_its_configured_base_url_then_its_login_then_the_api(tmp_path):
    home = tmp_path / "codex"
    home.mkdir()
    env = {"CODEX_HOME": str(home)}
    assert CODEX.upstream_url(env) == "https://api.openai.com/v1"
    (home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": None,
                                                "tokens": {"access_token": "t"}}))
    assert CODEX.upstream_url(env) == "https://chatgpt.com/backend-api/codex"
    # auth_mode, where the file has it, says which login it is.
    (home / "auth.json").write_text(json.dumps({"auth_mode": "apikey", "tokens": {"a": 1}}))
    assert CODEX.upstream_url(env) == "https://api.openai.com/v1"
    (home / "auth.json").write_text(json.dumps({"auth_mode": "chatgpt"}))
    assert CODEX.upstream_url(env) == "https://chatgpt.com/backend-api/codex"
    # An API key in the environment is what codex exec uses first.
    assert CODEX.upstream_url({**env, "CODEX_API_KEY": "k"}) == "https://api.openai.com/v1"
    (home / "config.toml").write_text('openai_base_url = "https://gw.example/openai/v1"\n')
    assert CODEX.upstream_url(env) == "https://gw.example/openai/v1"
    (home / "config.toml").write_text("not toml [")
    assert CODEX.upstream_url(env) == "https://chatgpt.com/backend-api/codex"


def test_codexs_proxy_refuses_websockets_and_reads_the_upstreams_responses_route():
    assert CODEX.proxy_options(AgentUpstream.parse("https://api.openai.com/v1")) == [
        "obsmask_refuse_websockets=true"]
    chatgpt = CODEX.proxy_options(AgentUpstream.parse("https://chatgpt.com/backend-api/codex"))
    assert chatgpt[1] == "obsmask_responses_route=/backend\\-api/codex/responses$"
    assert CLAUDE.proxy_options(AgentUpstream.parse("https://api.anthropic.com")) == []


def test_the_launcher_reads_the_count_of_conversation_requests_from_the_proxys_summary():
    """The summary is the totals' own (totals/totals.py): the launcher's
    hint for a run the proxy saw nothing of reads its first line."""
    from obsmask_core.launch.proxy_process import conversation_requests
    from obsmask_core.totals.totals import Totals

    lines = [f"obsmask: {line}" for line in Totals().summary_lines()]
    assert conversation_requests(lines) == 0
    assert conversation_requests(["obsmask: totals: 1,204 conversation request(s): 3 masked"]) \
        == 1204
    assert conversation_requests([]) is None
