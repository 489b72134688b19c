import numpy as np
import pytest

from memstream import InvalidInputError, InvalidTenantError
from memstream.memory.tenancy import tenant_token
from memstream.projections.recall import MAX_RECALL_K, RecallQuery

VECTOR = np.ones(4, dtype=np.float32)


@pytest.mark.parametrize("tenant", ["acme", "a|b", "{x}", "*", "-", "@", "a b", "租户"])
def test_the_query_filters_on_the_tenant_token_only(tenant: str) -> None:
    query = RecallQuery(tenant, VECTOR, k=7)
    token = tenant_token(tenant)
    assert str(query.tenant_filter()) == f"@tenant_tag:{{{token}}}"
    rendered = str(query.render())
    assert rendered.startswith(f"(@tenant_tag:{{{token}}})=>[KNN 7 @embedding $vector")
    assert "HYBRID_POLICY ADHOC_BF" in rendered


def test_the_vector_travels_as_a_parameter() -> None:
    query = RecallQuery("acme", VECTOR).render()
    assert query.params["vector"] == VECTOR.tobytes()


@pytest.mark.parametrize("k", [0, -1, MAX_RECALL_K + 1])
def test_k_out_of_range_is_refused(k: int) -> None:
    with pytest.raises(InvalidInputError, match="k must be between"):
        RecallQuery("acme", VECTOR, k=k)


def test_an_invalid_tenant_never_reaches_a_query() -> None:
    with pytest.raises(InvalidTenantError):
        RecallQuery("a\x00", VECTOR)
