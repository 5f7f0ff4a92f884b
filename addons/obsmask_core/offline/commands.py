"""The command lines of ``obsmask report`` and ``obsmask measure`` (and of
their thin wrappers scripts/report.py and scripts/measure.py).

report: one self-contained HTML page with pictures of what obsmask did.

    obsmask report FLOWS.mitm [more.mitm ...] [-o report.html]
    obsmask report flows.mitm --config mitm.toml --set obsmask_window_turns=2

The flow files are read with mitmproxy (record them with ``mitmdump -w``, or
save them from mitmweb). The requests on the Chat Completions, Messages and
Responses routes are grouped by conversation; the page opens with what
obsmask saved (per conversation: the bill with obsmask over the bill
without, estimated by the replay and, where the flows have them, from the
provider's own figures), then for each conversation the input tokens with
and without masking and the cached share the provider reported, the moves of
the masking frontier, and the bill so far under each price model, then the
MCP answers obsmask cut. Every plot has the table of its numbers beside it.

The bill replays each conversation's original requests (a masked flow's
original is its backup) under the settings the proxy would use: the
settings file (--config, else mitm.toml in the current directory, else
obsmask's recommended settings), then --set obsmask_<key>=VALUE options.
Without --config and a --set of the masking policy, the values the flows
recorded (window_turns, price_model, allowance_percent) go over the file's,
so the replay follows what the proxy did; the page says which. The page holds
its style and its plots (inline SVG): it opens offline.

measure: what obsmask does to the bill of your own sessions, estimated by a
replay.

    obsmask measure session.mitm
    obsmask measure session.mitm --set obsmask_window_turns=4 --json
    obsmask measure body1.json body2.json --config my.toml --profile no_cache

INPUT is a mitmproxy flow file (recorded through obsmask or not) or a request
body (JSON) in any of the three wire formats; several may be given. A flow
obsmask masked is read from its backup, the original. The settings are the
proxy's (the settings file, its profile, then --set options with the
proxy's names and value syntax); an unknown option or a wrong value: one
line, and exit status 2. The requests are grouped into conversations, each
replayed without obsmask and with it and billed under each price model; the
report gives the bill with and without obsmask in total and per
conversation, then the tokens, then the provider's own figures where the
flows have them. --json prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from obsmask_core.offline.errors import OfflineError

# A command line error, as argparse exits with.
USAGE_ERROR = 2
_REPORT_HELP, _MEASURE_HELP = (
    part.split("\n\n")[0].split(": ", 1)[1]
    for part in (__doc__ or "").split("\n\n")
    if part.startswith(("report: ", "measure: "))
)


def report_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=_REPORT_HELP)
    parser.add_argument("flows", type=Path, nargs="+", metavar="FLOWS.mitm",
                        help="mitmproxy flow files, read in this order")
    parser.add_argument("-o", "--output", type=Path, default=Path("report.html"),
                        help="the page to write (default: report.html)")
    parser.add_argument("--config", default=None, metavar="PATH",
                        help="obsmask's settings file (default: mitm.toml in the current "
                             "directory, else obsmask's recommended settings)")
    parser.add_argument("--set", dest="assignments", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="an obsmask option, as for the proxy: "
                             "--set obsmask_window_turns=2; repeatable")
    return parser


def report_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Write the report page; the exit status (a message on stderr when not 0)."""
    from obsmask_core.offline.report.policy_choice import UserSettings
    from obsmask_core.offline.report.run import build_report

    args = report_parser(prog).parse_args(argv)
    settings = UserSettings(args.config, tuple(args.assignments))
    try:  # a setting the proxy would refuse stops the report here too
        page, conversations, requests = build_report(args.flows, settings)
        args.output.write_text(page, encoding="utf-8")
    except OfflineError as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"report: {args.output}: cannot be written ({e.strerror})", file=sys.stderr)
        return 1
    print(f"report: wrote {args.output} ({conversations} conversation(s), "
          f"{requests} request(s))", file=sys.stderr)
    return 0


def measure_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=_MEASURE_HELP)
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                        help="a flow file (.mitm) or a request body (.json)")
    parser.add_argument("--config", help="the settings file (default: ./mitm.toml when there "
                        "is one, else obsmask's recommended settings), as --set obsmask_config")
    parser.add_argument("--profile", help="a profile of the settings file "
                        "([observation_masking.profiles.NAME]), as --set obsmask_profile")
    parser.add_argument("--set", action="append", default=[], dest="options",
                        metavar="NAME=VALUE", help="an option of the proxy, e.g. "
                        "obsmask_window_turns=4; repeat an array option for each value")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--per-request", action="store_true",
                        help="also list the provider's figures request by request")
    return parser


def measure_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Print the measurement; the exit status (a message on stderr when not 0)."""
    from obsmask_core.offline.measure.document import json_document
    from obsmask_core.offline.measure.run import measure
    from obsmask_core.offline.measure.text import text_report
    from obsmask_core.offline.proxy_settings import SettingsRefused, settings_in_force

    args = measure_parser(prog).parse_args(argv)
    try:
        settings = settings_in_force(args.options, args.config, args.profile)
    except SettingsRefused as e:
        print(f"measure: {e}", file=sys.stderr)
        return USAGE_ERROR
    try:
        measurement = measure(args.inputs, settings)
    except OfflineError as e:
        print(f"measure: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(json_document(measurement), indent=2, ensure_ascii=False))
    else:
        print(text_report(measurement, per_request=args.per_request))
    return 0
