"""The settings of the totals (``[totals]``), declared once."""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.shared.networks import check_networks
from obsmask_core.shared.settings import check_fields, setting

TOTALS_SECTION = ("totals",)
# The routes the proxy answers itself, on any host (as the recall server's).
TOTALS_PATH = "/obsmask/totals"
METRICS_PATH = "/obsmask/metrics"


@dataclass(frozen=True, kw_only=True)
class TotalsSettings:
    """What obsmask adds up and who may read it. Each field is a setting: a
    key of ``[totals]`` and an ``obsmask_totals_<key>`` option."""

    enabled: bool = setting(True, """
        Add up what obsmask did (per conversation and for the whole run),
        log it when the proxy stops, and serve it at /obsmask/totals (JSON)
        and /obsmask/metrics (Prometheus) on the proxy. false: nothing is
        added up and both routes answer 404.""")
    allow_clients: tuple[str, ...] = setting((), """
        Networks besides the loopback (127.0.0.0/8, ::1) whose clients may
        read /obsmask/totals and /obsmask/metrics, e.g. 10.0.0.0/8 for a
        Prometheus server on another host.""", check=check_networks)
    conversations_kept: int = setting(1000, """
        The totals of this many conversations are kept, the most recently
        active ones; the whole run's totals count every conversation.""",
        minimum=1, maximum=1_000_000)
    input_cents_per_million_tokens: int = setting(0, """
        Your provider's price of uncached input, in US cents per million
        tokens (300 for $3), to state the estimated money saved in dollars.
        0: the saving is given in input tokens at the base price only.""",
        minimum=0, maximum=1_000_000)

    def __post_init__(self) -> None:
        check_fields(self)
