"""The ``obsmask`` command's arguments (cli/main.py, cli/command_line.py):
which mitmproxy tool it runs, that the addon script comes first, and that it
listens on the loopback unless told otherwise. The installed command itself
is run by tests/e2e/test_e2e_install.py."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from obsmask_core.cli import main as cli
from obsmask_core.cli.command_line import listen_host_default
from obsmask_core.shared.config_file import RECOMMENDED_CONFIG
from support.processes import ADDON

LOOPBACK = ["--listen-host", "127.0.0.1"]


def test_the_addon_script_is_the_one_beside_the_package():
    """In a checkout, addons/obsmask.py: the script mitmdump -s loads."""
    assert cli.ADDON_SCRIPT == ADDON.resolve()


def test_mitmdump_by_default_with_every_argument_after_the_script():
    tool, arguments = cli.tool_arguments(["--mode", "reverse:http://127.0.0.1:9", "-p", "0"])
    assert tool == "mitmdump"
    assert arguments == ["-s", str(cli.ADDON_SCRIPT), *LOOPBACK,
                         "--mode", "reverse:http://127.0.0.1:9", "-p", "0"]


def test_a_first_argument_names_the_tool():
    assert cli.tool_arguments(["mitmweb", "--web-port", "8081"]) == (
        "mitmweb", ["-s", str(cli.ADDON_SCRIPT), *LOOPBACK, "--web-port", "8081"])
    assert cli.tool_arguments(["mitmdump"]) == (
        "mitmdump", ["-s", str(cli.ADDON_SCRIPT), *LOOPBACK])
    # Only the first argument is looked at.
    assert cli.tool_arguments(["-p", "0", "mitmweb"])[0] == "mitmdump"


@pytest.mark.parametrize("chosen", [
    ["--listen-host", "0.0.0.0"],
    ["--listen-host=0.0.0.0"],
    ["--set", "listen_host=0.0.0.0"],
    ["--set=listen_host=0.0.0.0"],
])
def test_the_loopback_is_the_address_unless_the_arguments_choose_one(chosen):
    """mitmproxy listens on every interface by default; obsmask's commands
    listen on 127.0.0.1 unless the user names an address."""
    assert listen_host_default(["-p", "8080"]) == LOOPBACK
    assert listen_host_default(["-p", "8080", *chosen]) == []
    assert listen_host_default(["--set", "listen_port=8080"]) == LOOPBACK


def test_init_writes_the_recommended_settings_with_a_header(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init"]) == 0
    written = (tmp_path / "mitm.toml").read_text(encoding="utf-8")
    header, _, body = written.partition("\n\n")
    assert header.startswith("# Written by obsmask init (obsmask ")
    assert body == RECOMMENDED_CONFIG.read_text(encoding="utf-8")
    assert "wrote" in capsys.readouterr().err


def test_init_refuses_to_replace_a_settings_file_without_force(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mitm.toml").write_text("# mine\n", encoding="utf-8")
    assert cli.main(["init"]) == 1
    assert capsys.readouterr().err == (
        "obsmask init: mitm.toml is already here; --force replaces it\n")
    assert (tmp_path / "mitm.toml").read_text(encoding="utf-8") == "# mine\n"
    assert cli.main(["init", "--force"]) == 0
    assert "[observation_masking.schema1]" in (tmp_path / "mitm.toml").read_text(
        encoding="utf-8")


def test_version_names_obsmask_then_runs_the_tools_own(monkeypatch, capsys):
    called = []
    monkeypatch.setattr(cli, "run_tool",
                        lambda tool, arguments: called.append((tool, arguments)) or 0)
    assert cli.main(["mitmweb", "--version"]) == 0
    assert capsys.readouterr().out.startswith("obsmask: ")
    assert called == [("mitmweb", ["--version"])]


def test_report_and_measure_are_commands_not_mitmdump_arguments(monkeypatch):
    seen = {}
    monkeypatch.setattr(cli, "COMMANDS", MappingProxyType({
        **cli.COMMANDS,
        "report": lambda rest: seen.setdefault("report", rest) and 0,
        "measure": lambda rest: seen.setdefault("measure", rest) and 0}))
    assert cli.main(["report", "a.mitm", "-o", "r.html"]) == 0
    assert cli.main(["measure", "a.mitm", "--json"]) == 0
    assert seen == {"report": ["a.mitm", "-o", "r.html"], "measure": ["a.mitm", "--json"]}


def test_help_lists_every_command_with_one_line_each(capsys):
    """``obsmask help`` and ``obsmask --help`` are obsmask's, not mitmdump's."""
    for spelled in (["help"], ["--help"], ["-h"]):
        assert cli.main(spelled) == 0
        out = capsys.readouterr().out
        for name in set(cli.COMMANDS) - {"help", "--help", "-h"}:
            assert f"  obsmask {name} " in out, (name, out)
        assert "obsmask mitmdump --help" in out


def test_the_agent_commands_are_commands_not_mitmdump_arguments(monkeypatch):
    called: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(cli, "COMMANDS", MappingProxyType({
        **cli.COMMANDS, "claude": lambda rest: called.append(("claude", rest)) or 0}))
    assert cli.main(["claude", "-p", "hi"]) == 0
    assert called == [("claude", ["-p", "hi"])]


def test_the_commands_scripts_proxy_hands_on_are_commands_of_obsmask():
    """scripts/proxy.py passes these to the obsmask command in a checkout."""
    from obsmask_core.cli.command_line import LAUNCHERS

    assert set(LAUNCHERS) <= set(cli.COMMANDS)
