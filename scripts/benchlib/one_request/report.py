"""bench_observation_masking_schema1's output: the totals over the measured
requests, as one JSON document or a short summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from benchlib.one_request.measure import RequestFigures, SkippedRequest, is_measured
from obsmask_core.conversation.settings.policy import MaskPolicy


@dataclass(frozen=True)
class ReportSettings:
    input_name: str
    repeat_history: int
    policy: MaskPolicy
    token_encoding: str | None
    price_per_mtok: float  # USD per million input tokens
    repeat: int  # timing repetitions


# The figures of a request that add up over requests.
Count = Literal["tool_turns", "tool_results", "masked_tool_results", "tool_chars_before",
                "tool_chars_after", "tokens_before", "tokens_after", "body_bytes_before",
                "body_bytes_after"]


@dataclass(frozen=True)
class Totals:
    """The sums over the requests obsmask could read."""

    measured: list[RequestFigures]

    @property
    def requests(self) -> int:
        return len(self.measured)

    def __getitem__(self, count: Count) -> int:
        return sum(figures[count] for figures in self.measured)

    @property
    def mask_ms(self) -> float:
        return sum(figures["mask_ms"] for figures in self.measured)

    @property
    def json_roundtrip_ms(self) -> float:
        return sum(figures["json_roundtrip_ms"] for figures in self.measured)

    def cost_usd(self, count: Count, price_per_mtok: float) -> float:
        return round(self[count] * price_per_mtok / 1e6, 6)


def totals(per_request: list[RequestFigures | SkippedRequest]) -> Totals:
    return Totals([figures for figures in per_request if is_measured(figures)])


def percent(before: float, after: float) -> float | None:
    return round((after - before) / before * 100, 2) if before else None


def json_report(settings: ReportSettings, sums: Totals,
                per_request: list[RequestFigures | SkippedRequest]) -> dict[str, object]:
    """The totals (and every request's figures, when there are several)."""
    policy, price = settings.policy, settings.price_per_mtok
    report: dict[str, object] = {
        "input": settings.input_name,
        "repeat_history": settings.repeat_history,
        "requests": sums.requests,
        "requests_skipped": len(per_request) - sums.requests,
        "policy": {
            "window_turns": policy.window_turns,
            "keep_errors": policy.keep_errors,
            "keep_last_k_per_tool": policy.per_tool_keep,
        },
        "token_encoding": settings.token_encoding,
        "tool_turns": sums["tool_turns"],
        "tool_results": sums["tool_results"],
        "masked_tool_results": sums["masked_tool_results"],
        "tool_chars_before": sums["tool_chars_before"],
        "tool_chars_after": sums["tool_chars_after"],
        "tool_chars_delta_pct": percent(sums["tool_chars_before"], sums["tool_chars_after"]),
        "tokens_before": sums["tokens_before"],
        "tokens_after": sums["tokens_after"],
        "tokens_delta_pct": percent(sums["tokens_before"], sums["tokens_after"]),
        "body_bytes_before": sums["body_bytes_before"],
        "body_bytes_after": sums["body_bytes_after"],
        "price_per_mtok_usd": price,
        "cost_before_usd": sums.cost_usd("tokens_before", price),
        "cost_after_usd": sums.cost_usd("tokens_after", price),
        "timing": {
            "repeat": settings.repeat,
            "mask_ms_median": round(sums.mask_ms, 3),
            "json_roundtrip_ms_median": round(sums.json_roundtrip_ms, 3),
            "mask_vs_json_roundtrip":
                round(sums.mask_ms / sums.json_roundtrip_ms, 2) if sums.json_roundtrip_ms
                else None,
        },
    }
    if len(per_request) > 1:
        report["per_request"] = per_request
    return report


def summary_text(settings: ReportSettings, sums: Totals) -> str:
    """A few lines for a person."""
    price = settings.price_per_mtok
    return (
        f"{settings.input_name}: {sums.requests} request(s), window "
        f"{settings.policy.window_turns}\n"
        f"  masked {sums['masked_tool_results']} of {sums['tool_results']} tool results\n"
        f"  tool chars {sums['tool_chars_before']:,} -> {sums['tool_chars_after']:,} "
        f"({percent(sums['tool_chars_before'], sums['tool_chars_after'])}%)\n"
        f"  tokens     {sums['tokens_before']:,} -> {sums['tokens_after']:,} "
        f"({percent(sums['tokens_before'], sums['tokens_after'])}%, {settings.token_encoding})\n"
        f"  cost       ${sums.cost_usd('tokens_before', price):.4f} -> "
        f"${sums.cost_usd('tokens_after', price):.4f} at ${price}/M input tokens\n"
        f"  time       masking {sums.mask_ms:.2f} ms vs json round trip "
        f"{sums.json_roundtrip_ms:.2f} ms"
    )
