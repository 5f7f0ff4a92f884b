"""The ``obsmask`` command of the installed package: mitmdump (or mitmweb)
with obsmask loaded, and the tools around it.

    obsmask [mitmdump|mitmweb] [mitmproxy arguments...]
    obsmask claude|codex [OPTIONS] [--] [AGENT ARGUMENTS...]  # launch/command.py
    obsmask run [OPTIONS] -- COMMAND [ARGUMENTS...]           # launch/command.py
    obsmask report FLOWS.mitm... [-o report.html]   # offline/commands.py
    obsmask measure INPUT...                        # offline/commands.py
    obsmask init [--force]    # ./mitm.toml with the recommended settings
    obsmask help, --help      # the commands, one line each
    obsmask --version         # obsmask's version, then mitmproxy's

Without a mitm.toml in the current directory the proxy runs with the
recommended settings the package ships (shared/config_file.py), which
``obsmask init`` writes there for editing.

The proxy: it does what ``python3 scripts/proxy.py`` does in a checkout: it calls
mitmproxy's own console entry point (``mitmproxy.tools.main.mitmdump``, what
the ``mitmdump`` command runs, through ``mitm/tools.py``) with ``-s`` naming the addon script,
``obsmask.py``, and every other argument as given. The package installs that
script beside ``obsmask_core`` (in a checkout it is ``addons/obsmask.py``, the
same place relative to the package).

Why a script and not the addons handed to mitmproxy directly:
``mitmproxy.tools.main.run`` takes a master class, not extra addons, and an
addon added to the master before start-up is only configured with the
options that change, while the script loader configures a script's addons
with every option (that is when the settings file is read) and reports a
start-up error as ``mitmdump -s`` does, on mitmproxy 11 and 12 alike.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from types import MappingProxyType

from obsmask_core.cli.command_line import listen_host_default, split_tool
from obsmask_core.launch.command import agent_main, run_main
from obsmask_core.mitm.tools import run_tool
from obsmask_core.offline.commands import measure_main, report_main
from obsmask_core.shared.config_file import DEFAULT_CONFIG_NAME, RECOMMENDED_CONFIG

ADDON_SCRIPT = Path(__file__).resolve().parents[2] / "obsmask.py"


def tool_arguments(arguments: Sequence[str]) -> tuple[str, list[str]]:
    """The mitmproxy tool to run (a first argument ``mitmdump`` or
    ``mitmweb``; mitmdump without one) and its arguments: the addon script
    first, then the loopback as the address unless the arguments choose one."""
    tool, rest = split_tool(arguments)
    return tool, ["-s", str(ADDON_SCRIPT), *listen_host_default(rest), *rest]


def obsmask_version() -> str:
    """The installed distribution's version ("unknown" in a checkout that
    was not installed)."""
    try:
        return metadata.version("obsmask")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def init_main(argv: Sequence[str], prog: str = "obsmask init") -> int:
    """Write the recommended settings to ./mitm.toml; 1 if one is there
    already and --force was not given."""
    parser = argparse.ArgumentParser(
        prog=prog, description=f"Write {DEFAULT_CONFIG_NAME} in the current directory, with "
        "obsmask's recommended settings and a comment for every key; obsmask started here "
        "then reads it.")
    parser.add_argument("--force", action="store_true",
                        help=f"replace a {DEFAULT_CONFIG_NAME} that is already there")
    args = parser.parse_args(argv)
    target = Path(DEFAULT_CONFIG_NAME)
    if target.exists() and not args.force:
        print(f"{prog}: {target} is already here; --force replaces it", file=sys.stderr)
        return 1
    header = (f"# Written by obsmask init (obsmask {obsmask_version()}): obsmask's recommended "
              "settings.\n# obsmask started in this directory reads this file; edit it "
              "freely.\n\n")
    try:
        target.write_text(header + RECOMMENDED_CONFIG.read_text(encoding="utf-8"),
                          encoding="utf-8")
    except OSError as e:
        print(f"{prog}: {target}: cannot be written ({e.strerror})", file=sys.stderr)
        return 1
    print(f"{prog}: wrote {target.resolve()}", file=sys.stderr)
    return 0


# What ``obsmask help`` says of each command, in its order.
HELP = (
    ("obsmask [mitmdump] [OPTIONS]", "run the proxy (mitmdump with obsmask loaded)"),
    ("obsmask mitmweb [OPTIONS]", "the same, with mitmproxy's web interface"),
    ("obsmask claude [OPTIONS] [-- ARGS]", "run Claude Code through a proxy of its own, "
     "print the saving"),
    ("obsmask codex [OPTIONS] [-- ARGS]", "run Codex through a proxy of its own, print the "
     "saving"),
    ("obsmask run [OPTIONS] -- COMMAND", "the same for any program that reads a base-URL "
     "variable"),
    ("obsmask report FLOWS.mitm...", "an HTML page of what obsmask did in recorded flows"),
    ("obsmask measure INPUT...", "the bill of recorded traffic with and without masking"),
    ("obsmask init [--force]", "write ./mitm.toml with the recommended settings"),
    ("obsmask --version", "obsmask's version, then mitmproxy's"),
)


def help_main(argv: Sequence[str]) -> int:
    """The commands, one line each, then where each one's options are."""
    width = max(len(command) for command, _ in HELP)
    print("obsmask: cut the token bill of LLM agents\n")
    print("\n".join(f"  {command:<{width}}  {what}" for command, what in HELP))
    print("\nEach command's options: obsmask COMMAND --help (the proxy's are mitmproxy's: "
          "obsmask mitmdump --help).")
    return 0


# The commands besides the proxy, each given the arguments after its name.
COMMANDS: Mapping[str, Callable[[list[str]], int]] = MappingProxyType({
    "claude": lambda rest: agent_main("claude", rest),
    "codex": lambda rest: agent_main("codex", rest),
    "run": run_main,
    "report": lambda rest: report_main(rest, prog="obsmask report"),
    "measure": lambda rest: measure_main(rest, prog="obsmask measure"),
    "init": init_main,
    "help": help_main,
    "--help": help_main,
    "-h": help_main,
})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command (the proxy until it stops); its exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in COMMANDS:
        return COMMANDS[arguments[0]](arguments[1:])
    tool, rest = split_tool(arguments)
    if rest[:1] == ["--version"]:
        print(f"obsmask: {obsmask_version()}", flush=True)
        return run_tool(tool, ["--version"])
    if not ADDON_SCRIPT.is_file():
        print(f"obsmask: the addon script {ADDON_SCRIPT} is missing; reinstall obsmask",
              file=sys.stderr)
        return 1
    tool, arguments = tool_arguments(arguments)
    return run_tool(tool, arguments)


if __name__ == "__main__":
    sys.exit(main())
