"""Recall's ranking, whatever backend finds the candidates: the words a memory and a query are
searched by (`tokens`), the per-tenant BM25 (`bm25`), score fusion with importance and recency
(`fusion`), near-duplicate collapse (`dedup`), and `rank`, which joins them.

A projection backend only finds candidates (a memory and its vector) and counts the tenant's
statistics; every backend then ranks them here, the same way."""
