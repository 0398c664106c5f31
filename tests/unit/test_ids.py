from collections import Counter

from leasehold.core.ids import derived_id, new_id, shard_of


def test_new_ids_sort_by_creation_time_and_do_not_collide() -> None:
    ids = [new_id(1_700_000_000_000 + i) for i in range(1000)]
    assert ids == sorted(ids)
    assert len(set(new_id(1) for _ in range(10_000))) == 10_000
    assert all(len(i) == 26 for i in ids)


def test_derived_ids_are_stable_and_distinct_from_time_ordered_ids() -> None:
    a = derived_id("job", "tenant-a", "key-1")
    assert a == derived_id("job", "tenant-a", "key-1")
    assert a != derived_id("job", "tenant-b", "key-1")
    assert a.startswith("K") and not new_id(1_767_225_600_000).startswith("K")


def test_shards_spread_ids_evenly() -> None:
    counts = Counter(shard_of(new_id(1_700_000_000_000 + i), 8) for i in range(8000))
    assert set(counts) == set(range(8))
    assert max(counts.values()) < 1.15 * 1000
