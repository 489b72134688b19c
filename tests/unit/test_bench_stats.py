"""The bench's pure parts: percentiles, ratios, the BM25 and vector baselines, recall@k."""

import math
import time

import numpy as np
import pytest

from memstream.errors import InvalidInputError
from memstream_bench.baselines import BM25, RecallAtK, cosine_ranking
from memstream_bench.report import BenchResult, Comparison, RunReport
from memstream_bench.stats import Latency, Spread, machine_cpu_s, percentile, ratio


def test_percentiles_interpolate_between_closest_ranks() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile(values, 0) == 1 and percentile(values, 100) == 100
    assert percentile([3.0], 99) == 3.0
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0  # order of input does not matter
    assert percentile(values, 99) == pytest.approx(float(np.percentile(values, 99)))


def test_percentile_refuses_nothing_and_out_of_range() -> None:
    with pytest.raises(InvalidInputError):
        percentile([], 50)
    with pytest.raises(InvalidInputError):
        percentile([1.0], 101)


def test_latency_is_in_milliseconds() -> None:
    latency = Latency.of_seconds([0.001, 0.002, 0.003])
    assert latency.p50_ms == 2.0 and latency.count == 3 and latency.mean_ms == 2.0


def test_ratio_is_ours_over_raw_and_nan_without_a_baseline() -> None:
    assert ratio(2.0, 4.0) == 0.5
    assert math.isnan(ratio(1.0, 0.0))


def test_bm25_ranks_rare_exact_words_first() -> None:
    docs = [
        "Caroline went to the support group on Tuesday",
        "Melanie painted a sunrise by the lake",
        "the group talked about the lake",
        "",
    ]
    index = BM25(docs)
    assert index.rank("When did Caroline go to the support group?", 3)[0] == 0
    assert index.rank("sunrise painting", 3) == [1]
    assert index.rank("the of to", 3) == []  # stopwords only: nothing scores
    scores = index.scores("lake")
    assert scores[1] > 0 and scores[2] > 0 and scores[0] == 0


def test_bm25_matches_the_formula_on_a_tiny_corpus() -> None:
    index = BM25(["apple apple pie", "pie"])
    idf = math.log(1 + (2 - 1 + 0.5) / (1 + 0.5))
    norm = 1.2 * (1 - 0.75 + 0.75 * 3 / 2)
    assert index.scores("apple")[0] == pytest.approx(idf * 2 * 2.2 / (2 + norm))


def test_cosine_ranking_orders_by_similarity() -> None:
    docs = np.eye(3, dtype=np.float32)
    query = np.array([0.1, 0.9, 0.4], dtype=np.float32)
    assert cosine_ranking(docs, query, 2) == [1, 2]
    assert cosine_ranking(docs, query, 10) == [1, 2, 0]
    assert cosine_ranking(np.zeros((0, 3), dtype=np.float32), query, 5) == []


def test_recall_at_k_is_the_mean_share_of_evidence_found() -> None:
    scores = RecallAtK()
    scores.add(["D1:1", "D1:2", "D1:3"], ["D1:2", "D1:9"])  # half found, at rank 2
    scores.add(["D1:5"], ["D1:5"])
    assert scores.as_json() == {
        "recall@1": 0.5,
        "recall@5": 0.75,
        "recall@10": 0.75,
        # hit@k: the first question has one of its two evidence turns at rank 2.
        "hit@1": 0.5,
        "hit@5": 1.0,
        "hit@10": 1.0,
    }
    with pytest.raises(InvalidInputError):
        scores.add(["x"], [])


def test_session_recall_counts_an_evidence_session_found_by_any_of_its_evidence_turns() -> None:
    sessions = {"D1:1": "s1", "D1:2": "s1", "D2:1": "s2", "D3:1": "s3"}
    scores = RecallAtK(ks=(1,), session_ks=(1, 5))
    # Evidence in sessions 1 and 2; the top hit is an evidence turn of session 1, and session 3
    # (retrieved, but holding no evidence) does not count.
    scores.add(["D1:2", "D3:1", "D2:1"], ["D1:1", "D1:2", "D2:1"], sessions)
    assert scores.as_json() == {
        "recall@1": round(1 / 3, 4),
        "hit@1": 1.0,
        "session_recall@1": 0.5,
        "session_recall@5": 1.0,
    }


def test_a_report_renders_its_comparisons(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    row = Comparison("p99", 2.0, 1.0, "ms", "raw", False, "≤ 1.3x")
    report = RunReport(
        datetime(2025, 1, 1, tzinfo=UTC),
        [BenchResult("recall", {"p99_ms": 2.0}, [row], ["a note"])],
        {"hook": "pending"},
    )
    markdown = report.markdown()
    assert "| recall | p99 | 2.00 ms | 1.00 ms (raw) | 2.00 | ≤ 1.3x |" in markdown
    assert "| hook | skipped |" in markdown and "- recall: a note" in markdown
    assert report.as_json()["results"]["recall"]["comparisons"][0]["ratio"] == 2.0
    paths = report.write(tmp_path / "out")
    assert [p.name for p in paths] == ["report.json", "report.md", "report.png"]
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_spread_is_the_median_of_the_rounds_with_their_range() -> None:
    odd = Spread.of([1.2, 0.9, 1.0, 1.1, 0.8])
    assert (odd.median, odd.low, odd.high, odd.rounds) == (1.0, 0.8, 1.2, 5)
    even = Spread.of([1.0, 1.1, 0.9, 1.3])  # the mean of the middle two
    assert (even.median, even.low, even.high) == (1.05, 0.9, 1.3)
    assert str(Spread.of([1.02])) == "1.020 (1.020 to 1.020 over 1 rounds)"


def test_a_spread_of_no_rounds_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="no rounds"):
        Spread.of([])


def test_the_machine_s_cpu_counts_at_least_what_this_process_burns() -> None:
    machine, mine = machine_cpu_s(), time.process_time()
    while time.process_time() - mine < 0.3:  # busy on purpose: the CPU is what is measured
        pass
    # /proc/stat counts in ticks (10 ms here): allow two of them.
    assert machine_cpu_s() - machine >= 0.3 - 0.02
