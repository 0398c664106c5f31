"""docs/capacity.md is arithmetic on a bench run: check the arithmetic and the flags."""

from __future__ import annotations

import json
from pathlib import Path

from bench import capacity
from bench.tenant_shards import paper_limit

RESULTS = json.loads((Path(__file__).resolve().parents[2] / "bench" / "results.json")
                     .read_text())


def test_one_tenant_reaches_ten_thousand_jobs_a_second_on_paper_only_when_sharded() -> None:
    assert paper_limit(1, 1)["jobs_per_second"] == 250  # one admission item: 4 units per job
    sharded = paper_limit(50, 32)
    assert sharded["jobs_per_second"] >= 10_000
    # Every write of a row lands in its tenant's home: 3 units a job, 32 homes.
    assert sharded["index_jobs_per_second"] == 10_666


def test_the_rows_scale_the_measured_units_and_flag_what_passes_a_limit() -> None:
    rows = {row["rate"]: row for row in capacity.rows(RESULTS)}
    units = RESULTS["per_job"]["immediate"]["write_units_by_table"]
    assert rows[10_000]["jobs_table_write_units"] == 10_000 * units["jobs"]
    assert rows[10_000]["admission_shards"] == 50
    # Every write of a row lands in its tenant's home: 16 homes take one tenant's 1,000
    # jobs/s, not 10,000 (it needs 30 shards: LEASEHOLD_TENANT_SHARDS).
    assert rows[1_000]["tenant_index_units_per_shard_key"] <= capacity.PARTITION_WRITE_UNITS
    assert rows[10_000]["tenant_index_units_per_shard_key"] > capacity.PARTITION_WRITE_UNITS
    assert rows[10_000]["tenant_index_shards_needed"] == 30
    text = capacity.markdown(RESULTS)
    assert "**9,375** (over 1,000)" in text  # one tenant at 50k/s passes 16 homes
    assert text.count("| ") > 10 and RESULTS["date"] in text
