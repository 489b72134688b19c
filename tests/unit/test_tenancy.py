import re

import pytest

from memstream import validate_tenant
from memstream.errors import InvalidTenantError
from memstream.memory.tenancy import MAX_TENANT_CHARS, tenant_from_token, tenant_token

ODD_BUT_VALID = ["a|b", "{x}", "*", "-", "@", "a b", "ünïcødé", "租户", "a,b", " a", "Acme"]


@pytest.mark.parametrize("tenant", ODD_BUT_VALID)
def test_query_syntax_characters_are_valid_ids(tenant: str) -> None:
    assert validate_tenant(tenant) == tenant


@pytest.mark.parametrize(
    ("tenant", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("a" * (MAX_TENANT_CHARS + 1), "more than 256"),
        ("a\x00b", "U+0000"),
        ("a\nb", "U+000A"),
        ("a\u200bb", "U+200B"),
        (42, "must be a string"),
        (None, "must be a string"),
    ],
)
def test_unusable_ids_are_refused_with_the_reason(tenant: object, says: str) -> None:
    with pytest.raises(InvalidTenantError, match=re.escape(says)) as caught:
        validate_tenant(tenant)
    assert isinstance(caught.value, ValueError)
    assert caught.value.code == "invalid_tenant"


@pytest.mark.parametrize("tenant", ODD_BUT_VALID)
def test_tokens_are_hex_and_round_trip(tenant: str) -> None:
    token = tenant_token(tenant)
    assert set(token) <= set("0123456789abcdef")
    assert tenant_from_token(token) == tenant


def test_ids_differing_only_in_case_or_spaces_get_different_tokens() -> None:
    tokens = {tenant_token(t) for t in ["Acme", "acme", " acme", "acme "]}
    assert len(tokens) == 4
