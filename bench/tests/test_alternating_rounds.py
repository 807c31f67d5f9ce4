"""How the store benchmarks (``bench/alternating.py``) turn alternating rounds into the
figures the bench suite reads (``as_rates``): both rates of one operation come from the same
round, the one whose store/raw ratio is the median. The speed itself is never asserted here."""

from __future__ import annotations

from bench import alternating


def rounds(*pairs: tuple[float, float]) -> list[float]:
    return [rate for pair in pairs for rate in pair]


def test_as_rates_takes_both_rates_from_the_median_round() -> None:
    # Ratios 0.5, 0.9, 0.8: the median round is the third. The median store rate (400) over
    # the median raw rate (800) would be 0.5, a ratio no round measured.
    results = {
        "get": rounds((400.0, 800.0), (900.0, 1000.0), (200.0, 250.0)),
        "put_status": rounds((100.0, 200.0), (300.0, 200.0), (100.0, 100.0)),
        "claim": rounds((1.0, 2.0)),
    }
    rates = alternating.as_rates(results)
    assert (rates["store.get"], rates["raw read"]) == (200.0, 250.0)
    assert (rates["store.put_status"], rates["raw update"]) == (100.0, 100.0)
    assert (rates["store.claim"], rates["raw claim"]) == (1.0, 2.0)


def test_an_even_count_of_rounds_takes_the_lower_middle_round() -> None:
    assert alternating.median_round(rounds((1.0, 4.0), (3.0, 4.0), (2.0, 4.0), (4.0, 4.0))) == (
        2.0,
        4.0,
    )
