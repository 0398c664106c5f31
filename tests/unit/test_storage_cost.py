"""The storage line of BENCHMARKS.md: rows bounded by the measured write units, and
retention turns a bill that grows every month into one that stays flat (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import cost

RESULTS = json.loads((Path(__file__).parents[2] / "bench" / "results.json").read_text())


def test_storage_without_retention_grows_and_with_it_stays_at_about_a_month() -> None:
    immediate = RESULTS["per_job"]["immediate"]
    thirty = cost.storage(immediate, 30)
    assert 1024 < thirty["bytes_per_job_at_most"] < 2048  # one unit per write: <= 1 KB row
    monthly = thirty["without_retention_per_month_per_million_stored"]
    # (figures rounded to the cent or tenth of a cent)
    assert abs(thirty["without_retention_after_a_year_of_1m_a_day"] - monthly * 365) < 0.5
    assert abs(thirty["with_retention_per_million_jobs"] - monthly * 32 / 30) < 0.005
    assert cost.storage(immediate, 7)["with_retention_steady_at_1m_a_day"] < \
        thirty["with_retention_steady_at_1m_a_day"] < \
        thirty["without_retention_after_a_year_of_1m_a_day"]
