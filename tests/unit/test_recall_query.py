"""Recall queries, tested by the exact FT.SEARCH strings they render."""

import numpy as np
import pytest

from memstream import MemoryType
from memstream.errors import InvalidInputError, InvalidTenantError
from memstream.memory.ranking.tokens import MAX_QUERY_TERMS, query_terms
from memstream.memory.search import SearchFilter
from memstream.memory.tenancy import tenant_token
from memstream.projections.recall import (
    MAX_RECALL_K,
    HybridQuery,
    LexicalQuery,
    TenantFilter,
    TenantStatsQuery,
    VectorQuery,
    escape_term,
    render_filter,
)

VECTOR = np.ones(4, dtype=np.float32)
TOKEN = tenant_token("acme")


@pytest.mark.parametrize("tenant", ["acme", "a|b", "{x}", "*", "-", "@", "a b", "租户"])
def test_the_vector_query_filters_on_the_tenant_token_only(tenant: str) -> None:
    token = tenant_token(tenant)
    assert TenantFilter(tenant).render() == f"@tenant_tag:{{{token}}}"
    assert VectorQuery(tenant, VECTOR, k=7).render() == (
        f"(@tenant_tag:{{{token}}})=>[KNN 7 @embedding $vector "
        "HYBRID_POLICY ADHOC_BF AS vector_distance]"
    )


def test_the_vector_travels_as_a_parameter() -> None:
    command = VectorQuery("acme", VECTOR).command("ns:memories:v1")
    assert command[:3] == ["FT.SEARCH", "ns:memories:v1", VectorQuery("acme", VECTOR).render()]
    at = command.index("PARAMS")
    assert command[at : at + 4] == ["PARAMS", 2, "vector", VECTOR.tobytes()]
    assert command[-2:] == ["DIALECT", 2]
    assert "SORTBY" in command and command[command.index("LIMIT") + 2] == 10


def test_the_lexical_query_is_a_union_of_escaped_words_inside_the_tenant() -> None:
    query = LexicalQuery("acme", "When did Caroline go to the LGBTQ support group on 7 May?")
    # Question words and auxiliaries are stopwords; "May" the month is kept.
    assert query.terms == ("caroline", "go", "lgbtq", "support", "group", "7", "may")
    assert query.render() == (
        f"(@tenant_tag:{{{TOKEN}}}) (@content|when:(caroline|go|lgbtq|support|group|7|may))"
    )
    command = query.command("ix")
    assert command is not None
    # Unstemmed: the candidates hold the words the per-tenant BM25 counts.
    assert command[:6] == ["FT.SEARCH", "ix", query.render(), "VERBATIM", "SCORER", "BM25"]
    assert "embedding" in command  # fusion needs every candidate's vector


def test_the_tenant_stats_count_the_tenant_and_each_term_within_it() -> None:
    commands = TenantStatsQuery("acme", ("caroline", "7")).commands("ix")
    tenant = f"@tenant_tag:{{{TOKEN}}}"
    count = ["VERBATIM", "LIMIT", 0, 0, "DIALECT", 2]
    assert commands == [
        ["FT.SEARCH", "ix", tenant, *count],
        ["FT.SEARCH", "ix", f"({tenant}) (@content|when:(caroline))", *count],
        ["FT.SEARCH", "ix", f"({tenant}) (@content|when:(7))", *count],
    ]


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("@tenant_tag:{*}", ("tenant_tag",)),
        ("-secret | *", ("secret",)),
        ("\"quoted phrase\" 'single'", ("quoted", "phrase", "single")),
        (
            "{braces} [brackets] (parens) ~tilde %fuzzy%",
            ("braces", "brackets", "parens", "tilde", "fuzzy"),
        ),
        (
            "@content:(x) => [KNN 5 @embedding $vector]",
            ("content", "x", "knn", "5", "embedding", "vector"),
        ),
        ("Zoë fuhr nach Zürich, 東京", ("zoë", "fuhr", "nach", "zürich", "東京")),
    ],
)
def test_hostile_text_becomes_plain_terms(text: str, terms: tuple[str, ...]) -> None:
    assert query_terms(text) == terms
    rendered = LexicalQuery("acme", text).render()
    assert rendered is not None
    tenant_part, _, words = rendered.partition(" ")
    assert tenant_part == f"(@tenant_tag:{{{TOKEN}}})"
    assert words == "(@content|when:(" + "|".join(escape_term(t) for t in terms) + "))"
    inner = words.removeprefix("(@content|when:(").removesuffix("))")
    # Nothing but escaped word characters and the unions this query put there.
    for term in inner.split("|"):
        assert all(ch.isalnum() or ch in "\\_" for ch in term), term


def test_escaping_puts_a_backslash_before_every_non_alphanumeric() -> None:
    assert escape_term("tenant_tag") == "tenant\\_tag"
    assert escape_term("a-b|c*{d}") == "a\\-b\\|c\\*\\{d\\}"
    assert escape_term("租户7") == "租户7"


def test_stopwords_only_means_no_lexical_query() -> None:
    # A union of stopwords reduces to the tenant filter alone and would match everything.
    assert LexicalQuery("acme", "is it the one? -- to be or not").terms == ("one",)
    assert LexicalQuery("acme", "to be, or not to be").render() is None
    assert LexicalQuery("acme", "?!").command("ix") is None


def test_terms_are_deduplicated_and_capped() -> None:
    assert query_terms("Tea tea TEA") == ("tea",)
    many = " ".join(f"w{i}" for i in range(MAX_QUERY_TERMS + 10))
    assert len(query_terms(many)) == MAX_QUERY_TERMS


def test_the_hybrid_query_asks_each_side_for_enough_candidates() -> None:
    query = HybridQuery("acme", "tea", VECTOR, k=5, candidates=40, vector_candidates=15)
    assert query.lexical == LexicalQuery("acme", "tea", 40)
    assert query.semantic.k == 15
    wide = HybridQuery("acme", "tea", VECTOR, k=100, candidates=40, vector_candidates=15)
    assert wide.lexical.k == wide.semantic.k == 100


@pytest.mark.parametrize("k", [0, -1, MAX_RECALL_K + 1])
def test_k_out_of_range_is_refused(k: int) -> None:
    with pytest.raises(InvalidInputError, match="k must be between"):
        VectorQuery("acme", VECTOR, k=k)
    with pytest.raises(InvalidInputError, match="k must be between"):
        HybridQuery("acme", "x", VECTOR, k=k)


def test_an_invalid_tenant_never_reaches_a_query() -> None:
    for build in (
        lambda: VectorQuery("a\x00", VECTOR),
        lambda: LexicalQuery("a\x00", "x"),
        lambda: HybridQuery("", "x", VECTOR),
        lambda: TenantFilter("a\u200b"),
    ):
        with pytest.raises(InvalidTenantError):
            build()


@pytest.mark.parametrize(("words", "meaning"), [(0, 20), (50, 0)])
def test_a_list_without_candidates_is_refused(words: int, meaning: int) -> None:
    with pytest.raises(InvalidInputError, match="candidates must be at least 1"):
        HybridQuery("acme", "x", VECTOR, candidates=words, vector_candidates=meaning)


def test_a_filter_narrows_both_lists_but_not_the_tenants_statistics() -> None:
    where = SearchFilter("acme", threads=("monday",), memory_types=(MemoryType.USER_FACT,))
    query = HybridQuery("acme", "tea", VECTOR, k=5, where=where)
    scope = render_filter(where)
    assert query.lexical.render() == f"({scope}) (@content|when:(tea))"
    assert query.semantic.render().startswith(f"({scope})=>[KNN 20 @embedding $vector ")
    # A memory's BM25 does not depend on which others the filter lets through.
    assert query.stats.commands("ix") == TenantStatsQuery("acme", ("tea",)).commands("ix")
    unfiltered = HybridQuery("acme", "tea", VECTOR, k=5)
    assert unfiltered.lexical.render() == LexicalQuery("acme", "tea").render()
    assert unfiltered.semantic.render() == VectorQuery("acme", VECTOR, 20).render()


def test_a_filter_for_another_tenant_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="given a filter for 'globex'"):
        HybridQuery("acme", "tea", VECTOR, where=SearchFilter("globex"))
    with pytest.raises(InvalidInputError, match="given a filter for 'globex'"):
        VectorQuery("acme", VECTOR, where=SearchFilter("globex")).render()
