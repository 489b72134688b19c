"""Namespace -> tenant mapping of the LangGraph store."""

from __future__ import annotations

import pytest

from memstream import Settings
from memstream.errors import ConfigurationError, InvalidInputError, NamespaceTenantError
from memstream.integrations.namespaces import NamespaceTenants


def test_default_takes_the_first_two_labels_so_langmem_users_stay_apart() -> None:
    tenants = NamespaceTenants()
    alice = tenants.tenant_of(("memories", "alice"))
    bob = tenants.tenant_of(("memories", "bob"))
    assert alice == "memories.alice" and bob == "memories.bob"
    assert tenants.tenant_of(("alice", "memories")) != tenants.tenant_of(("bob", "memories"))
    assert tenants.tenant_of(("memories", "alice", "profile")) == alice


def test_a_chosen_label_is_the_tenant() -> None:
    tenants = NamespaceTenants((1,))
    assert tenants.tenant_of(("memories", "alice")) == "alice"
    assert tenants.tenant_of(("profiles", "alice", "x")) == "alice"


def test_a_namespace_too_short_to_name_its_tenant_is_refused() -> None:
    with pytest.raises(NamespaceTenantError, match=r"needs at least 2.*TENANT_LABELS"):
        NamespaceTenants().tenant_of(("memories",))
    with pytest.raises(NamespaceTenantError):
        NamespaceTenants((0,)).tenant_of(())


def test_a_wildcard_or_unprintable_label_cannot_name_a_tenant() -> None:
    with pytest.raises(NamespaceTenantError, match="'\\*'"):
        NamespaceTenants((1,)).tenant_of(("memories", "*"))
    with pytest.raises(InvalidInputError):
        NamespaceTenants((1,)).tenant_of(("memories", "al\u200bice"))


def test_a_search_prefix_must_pin_one_tenant() -> None:
    tenants = NamespaceTenants((1,))
    assert tenants.search_tenant(("memories", "alice")) == "alice"
    for prefix in [(), ("memories",), ("memories", "*")]:
        assert tenants.pinned(prefix) is None
        with pytest.raises(NamespaceTenantError, match="would span tenants"):
            tenants.search_tenant(prefix)


def test_label_positions_are_checked() -> None:
    for bad in [(), (-1,), (1, 1)]:
        with pytest.raises(NamespaceTenantError):
            NamespaceTenants(bad)


def test_the_label_positions_setting_round_trips_through_the_environment() -> None:
    settings = Settings.from_env({"MEMSTREAM_LANGGRAPH_TENANT_LABELS": "2,0"})
    assert settings.langgraph_tenant_labels == (2, 0)
    assert settings.environ()["MEMSTREAM_LANGGRAPH_TENANT_LABELS"] == "2,0"
    assert Settings.from_env(settings.environ()) == settings
    for bad in ("x", "1,1", "-1"):
        with pytest.raises(ConfigurationError, match="MEMSTREAM_LANGGRAPH_TENANT_LABELS"):
            Settings.from_env({"MEMSTREAM_LANGGRAPH_TENANT_LABELS": bad})
