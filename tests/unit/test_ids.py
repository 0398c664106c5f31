from collections import Counter

from leasehold.aws.definitions import job_key
from leasehold.core.ids import (
    MAX_SHARDS,
    derived_id,
    derived_job_id,
    home,
    home_of,
    id_time,
    listed_at_home,
    new_id,
    new_job_id,
    shard_of,
)


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


def test_a_job_id_names_its_home_so_its_key_follows_from_the_id_alone() -> None:
    plain = new_job_id(1_767_225_600_000, "acme", 16)
    keyed = derived_job_id("acme", "job", "acme", "key-1")
    assert keyed == derived_job_id("acme", "job", "acme", "key-1")  # a replay finds it
    assert home_of(plain) in {home("acme", k) for k in range(16)}
    assert home_of(keyed) in {home("acme", k) for k in range(MAX_SHARDS)}
    assert home_of(new_job_id(1, "globex", 16)) not in {home("acme", k) for k in range(16)}
    assert job_key(plain) == {"pk": {"S": home_of(plain)}, "job_id": {"S": plain}}
    assert {home_of(new_job_id(1, "acme", 4)) for _ in range(400)} == {
        home("acme", k) for k in range(4)}  # a tenant's writes spread over its shards


def test_only_a_time_ordered_id_at_home_is_listed_from_its_home() -> None:
    now = 1_767_225_600_000
    plain = new_job_id(now, "acme", 16)
    assert id_time(plain) == now
    assert listed_at_home(plain, "acme", now, 16)
    assert not listed_at_home(plain, "acme", now + 1, 16)  # created at another time
    assert not listed_at_home(plain, "globex", now, 16)  # another tenant's home
    far = new_id(now) + home("acme", 40)
    assert not listed_at_home(far, "acme", now, 16)  # a shard beyond the setting's
    keyed = derived_job_id("acme", "job", "acme", "k")
    assert id_time(keyed) is None and not listed_at_home(keyed, "acme", now, 16)
    assert id_time("j1") is None and id_time("01kd" + plain[4:]) is None
