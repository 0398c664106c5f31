"""Tenants of IAM principals: injective, never folded, and the operator's mapping checked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasehold.api.principals import parse_mapping, principal_of
from leasehold.core.spec import check_tenant

ACCOUNTS = st.sampled_from(["111122223333", "444455556666"])
#: IAM names: A-Za-z0-9 and _+=,.@- (a federated user's name, 2-32 of them).
NAMES = st.text(alphabet="aB9_+=,.@-", min_size=2, max_size=32)
KINDS = st.sampled_from(["user", "role", "federated-user", "root"])


def arn_of(account: str, kind: str, name: str, session: str = "s") -> str:
    return {
        "user": f"arn:aws:iam::{account}:user/{name}",
        "role": f"arn:aws:sts::{account}:assumed-role/{name}/{session}",
        "federated-user": f"arn:aws:sts::{account}:federated-user/{name}",
        "root": f"arn:aws:iam::{account}:root",
    }[kind]


@given(st.tuples(ACCOUNTS, KINDS, NAMES), st.tuples(ACCOUNTS, KINDS, NAMES))
def test_two_principals_share_a_tenant_only_if_they_are_one(
        first: tuple[str, str, str], second: tuple[str, str, str]) -> None:
    def identity(account: str, kind: str, name: str) -> tuple[str, ...]:
        return (account, kind) if kind == "root" else (account, kind, name)

    a, b = principal_of(arn_of(*first)), principal_of(arn_of(*second))
    assert a is not None and b is not None
    assert (a == b) == (identity(*first) == identity(*second))
    # A valid tenant, and never one with the key separator of the tenancy items.
    assert check_tenant(a) == a and "#" not in a


@given(ACCOUNTS, NAMES, st.text(alphabet="xyz0_+=,.@-", min_size=2, max_size=32))
def test_every_session_of_a_role_and_the_role_itself_are_one_principal(
        account: str, name: str, session: str) -> None:
    assert principal_of(arn_of(account, "role", name, session)) == \
        principal_of(f"arn:aws:iam::{account}:role/some/path/{name}") == f"{account}:role/{name}"


def test_names_that_differ_only_in_punctuation_stay_apart() -> None:
    names = ["dev+ci", "dev=ci", "dev,ci", "dev.ci", "dev@ci", "dev-ci", "dev_ci", "Dev_ci"]
    found = {principal_of(f"arn:aws:iam::111122223333:user/{name}") for name in names}
    assert len(found) == len(names)


@pytest.mark.parametrize("arn", [
    "arn:aws:iam::111122223333:group/Admins",
    "arn:aws:sts::111122223333:assumed-role/OnlyRole",
    "arn:aws:sts::111122223333:federated-user/a b",
    "arn:aws:sts::111122223333:federated-user/a#b",
    "arn:aws:iam::1111:user/Bob",
    "arn:aws:sts::111122223333:federated-user/",
    "111122223333:user/a/b",
    "111122223333:root\n",
    "arn:aws:iam::111122223333:user/Bob\n",
    "",
])
def test_what_names_no_principal_is_none(arn: str) -> None:
    assert principal_of(arn) is None


def test_the_mapping_takes_arns_and_canonical_ids() -> None:
    mapping = parse_mapping('{"arn:aws:iam::111122223333:role/team/Deploy": "payments",'
                            ' "111122223333:user/alice": "payments",'
                            ' "arn:aws:iam::111122223333:root": "111122223333:root"}')
    assert mapping == {"111122223333:role/Deploy": "payments",
                       "111122223333:user/alice": "payments",
                       "111122223333:root": "111122223333:root"}
    assert parse_mapping("") == {}


@pytest.mark.parametrize(("value", "says"), [
    ("[1]", "must be a JSON object"),
    ("{", "not JSON"),
    ('{"arn:aws:iam::111122223333:group/G": "t"}', "'arn:aws:iam::111122223333:group/G'"),
    ('{"111122223333:user/bob": "a b"}', "not a valid tenant"),
    ('{"111122223333:user/bob": "t#1"}', "not a valid tenant"),
    ('{"111122223333:user/bob": "a", "arn:aws:iam::111122223333:user/x/bob": "b"}',
     "given twice"),
])
def test_a_bad_mapping_is_refused_naming_the_entry(value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("[", r"\[")):
        parse_mapping(value)
