#!/usr/bin/env python3
"""What obsmask does to the bill of your own sessions, estimated by a replay.

    python3 scripts/measure.py session.mitm
    python3 scripts/measure.py session.mitm --set obsmask_window_turns=4 --json
    python3 scripts/measure.py body1.json body2.json --config my.toml --profile no_cache

INPUT is a mitmproxy flow file (recorded with ``mitmdump ... -w
session.mitm``, through obsmask or not, or saved from mitmweb) or a request
body (JSON) in any of the three wire formats (Chat Completions, Anthropic
Messages, OpenAI Responses); several may be given. In a flow file, the
conversation requests are the ones the proxy would read as such (its routes,
``obsmask_*_route`` and ``obsmask_hosts``), and each is read as the client
sent it: a flow obsmask masked is read from its backup, the original (one
whose backup is missing or cannot be read is skipped and counted, as is a
flow obsmask recorded as a conversation request on a route not in force).

The settings are the proxy's: its built-in defaults, then the settings file
(--config, else ./mitm.toml when there is one), its profile (--profile),
then --set options with the proxy's names and value syntax. An unknown
option or a wrong value: one line, and exit status 2.

The requests are grouped into conversations (a request that a later one
continues is part of it), and each conversation is replayed request by
request without obsmask and with it, and billed under each price model
(scripts/benchlib/cache/: the cache benchmark's replay). A conversation in
the holdout group (holdout_percent) is replayed unmasked, as the proxy
leaves it, named as held out and counted in the headline, beside the bill
of the others alone. The report gives
the bill with and without obsmask under each price model, in total and per
conversation, then the tokens, then the provider's own figures where the
flows have them (flow metadata obsmask.provider_usage) next to the replay's
estimate for the same requests. --json prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bootstrap import REPO, run_inside

run_inside("main", "base")
sys.path.insert(0, str(REPO / "addons"))

from benchlib.errors import BenchError  # noqa: E402
from benchlib.measure.document import json_document  # noqa: E402
from benchlib.measure.run import measure  # noqa: E402
from benchlib.measure.text import text_report  # noqa: E402
from benchlib.proxy_settings import SettingsRefused, settings_in_force  # noqa: E402

# A command line error, as argparse exits with.
USAGE_ERROR = 2


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                        help="a flow file (.mitm) or a request body (.json)")
    parser.add_argument("--config", help="the settings file (default: ./mitm.toml when there "
                        "is one, else the built-in defaults), as --set obsmask_config")
    parser.add_argument("--profile", help="a profile of the settings file "
                        "([observation_masking.profiles.NAME]), as --set obsmask_profile")
    parser.add_argument("--set", action="append", default=[], dest="options",
                        metavar="NAME=VALUE", help="an option of the proxy, e.g. "
                        "obsmask_window_turns=4; repeat an array option for each value")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--per-request", action="store_true",
                        help="also list the provider's figures request by request")
    return parser.parse_args()


def main() -> None:
    args = parse_arguments()
    try:
        settings = settings_in_force(args.options, args.config, args.profile)
    except SettingsRefused as e:
        print(f"measure: {e}", file=sys.stderr)
        sys.exit(USAGE_ERROR)
    try:
        measurement = measure(args.inputs, settings)
    except BenchError as e:
        sys.exit(f"measure: {e}")
    if args.json:
        print(json.dumps(json_document(measurement), indent=2, ensure_ascii=False))
    else:
        print(text_report(measurement, per_request=args.per_request))


if __name__ == "__main__":
    main()
