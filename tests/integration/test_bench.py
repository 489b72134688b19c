"""`memstream bench` end to end on the real stack, in tiny configurations: the JSON it writes.

Speed is measured by the bench, never asserted here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstream_bench.harness import stub_chat

from .commands import memstream
from .helpers import TINY_LOCOMO

pytestmark = pytest.mark.integration


def test_bench_locomo_reports_recall_at_k_beside_baselines(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    out = tmp_path / "results"
    done = memstream(env, "bench", "locomo", "--data", str(data), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    locomo = report["results"]["locomo"]
    assert locomo["questions"] == 3  # categories 1-5, as the issue measured
    baselines = ("bm25", "vector", "bm25+vector rrf", "bm25+vector score fusion")
    for field in ("recall@1", "recall@5", "recall@10", "hit@1", "hit@5", "hit@10"):
        assert 0.0 <= locomo[field] <= 1.0
        for baseline in (*baselines, "memstream lexical-only", "memstream vector-only"):
            assert 0.0 <= locomo["baselines"][baseline][field] <= 1.0
    assert locomo["recall@10"] == 1.0  # three memories: everything is in the top 10
    # Session level beside dialogue level: with everything in the top 10, every session is found.
    assert locomo["session_recall@10"] == 1.0
    assert 0.0 <= locomo["baselines"]["bm25"]["session_recall@5"] <= 1.0
    # Per category (each with every method) and per split: conv-tiny is not a tuning one.
    assert set(locomo["categories"]) == {"1", "2", "5"}
    assert locomo["categories"]["5"]["bm25"]["questions"] == 1
    assert set(locomo["splits"]["held-out"]) >= {"memstream", *baselines}
    assert locomo["splits"]["tuning"] == {}
    # Each lever's contribution on the held-out part: the full ranking less it turned off
    # (three memories, all in every top 10: no lever moves recall@10 here).
    assert set(locomo["levers"]) == {
        "without neighbours",
        "without answers to questions",
        "without the question weight",
        "without importance and recency",
        "without deduplication",
        "without the reranker",
        "without meaning (vectors)",
        "without words (BM25), without the rest",
    }
    assert all(lever["recall@10"] == 0.0 for lever in locomo["levers"].values())
    assert {p.name for p in out.iterdir()} == {"report.json", "report.md", "report.png"}
    assert "questions" in done.stderr  # progress goes to stderr


def test_bench_recall_reports_latency_against_raw(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    done = memstream(
        env,
        "bench",
        "recall",
        "--sizes",
        "200,400",
        "--tenants",
        "10",
        "--queries",
        "20",
        "--out",
        str(tmp_path),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    recall = json.loads(done.stdout)["results"]["recall"]
    assert set(recall["sizes"]) == {"200", "400"}
    for field in ("p50_ms", "p99_ms", "raw_p99_ms", "p99_ratio"):
        assert recall[field] > 0
        assert recall["sizes"]["200"][field] > 0
    assert recall["memories"] == 400 and recall["tenants"] == 10
    assert recall["embed_query_p50_ms"] > 0
    for size in ("200", "400"):
        sized = recall["sizes"][size]
        assert 0 < sized["end_to_end_p50_ms"] <= sized["end_to_end_p95_ms"]
        # 384 float32 dims are 1,536 bytes, held by the index and again by the memory's hash.
        index, whole = sized["index_bytes_per_memory"], sized["redis_bytes_per_memory"]
        assert index > 1536 and index + 1536 < whole < 20_000, sized


def test_bench_console_times_each_page_against_the_api_underneath(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    done = memstream(
        env, "bench", "console", "--console-memories", "300", "--console-tenants", "10",
        "--console-requests", "5",
        "--out", str(tmp_path), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    console = json.loads(done.stdout)["results"]["console"]
    assert console["memories"] == 300 and console["tenants"] == 10 and console["requests"] == 5
    assert set(console["pages"]) == {"search", "listing", "memory"}
    for figures in console["pages"].values():
        assert 0 < figures["page_p50_ms"] <= figures["page_p95_ms"]
        assert 0 < figures["api_p50_ms"] <= figures["api_p95_ms"]
    measures = {c["measure"] for c in console["comparisons"]}
    assert measures == {f"{page} page p95 @300" for page in ("search", "listing", "memory")}


def test_bench_store_reports_each_operation_against_raw(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    done = memstream(env, "bench", "store", "--store-items", "40", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    store = json.loads(done.stdout)["results"]["store"]
    assert store["items"] == 40
    for operation in ("put", "get", "search"):
        for field in ("p50_ms", "p99_ms", "raw_p50_ms", "raw_p99_ms"):
            assert store[operation][field] > 0
    measures = {c["measure"] for c in store["comparisons"]}
    assert measures == {f"{op} {q}" for op in ("put", "get", "search") for q in ("p50", "p99")}


def test_bench_serve_reports_http_against_in_process_and_raw(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    done = memstream(
        env,
        "bench",
        "serve",
        "--serve-queries",
        "10",
        "--serve-writes",
        "48",
        "--serve-rounds",
        "2",
        "--serve-sequential",
        "5",
        "--serve-memories",
        "40",
        "--out",
        str(tmp_path),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    serve = json.loads(done.stdout)["results"]["serve"]
    assert serve["memories"] == 40 and serve["clients"] == 16 and serve["writes"] == 48
    assert serve["rounds"] == 2
    parts = ("search_http", "search_bare_http", "search_in_process", "get_http", "write_wait_true")
    sessions = ("session_put", "session_append", "prompt_with_session", "prompt_long_term_only")
    for part in (*parts, *sessions):
        assert serve[part]["p99_ms"] >= serve[part]["p50_ms"] > 0
    rates = ("writes_per_s", "raw_writes_per_s", "bare_http_writes_per_s")
    sessions_rates = ("session_puts_per_s", "session_appends_per_s")
    bare_sessions = ("bare_session_puts_per_s", "bare_session_appends_per_s")
    for rate in (*rates, *sessions_rates, *bare_sessions):
        assert serve[rate] > 0
    assert serve["p99_ratio"] > 0 and serve["writes_ratio_to_bare_http"] > 0
    # The median of each query's HTTP-minus-in-process time lies between the two extremes.
    paired = serve["p50_overhead_paired_ms"]
    assert -serve["search_in_process"]["p99_ms"] < paired < serve["search_http"]["p99_ms"]
    bare = serve["bare_p50_overhead_paired_ms"]
    assert -serve["search_in_process"]["p99_ms"] < bare < serve["search_bare_http"]["p99_ms"]
    over_bare = serve["p50_over_bare_paired_ms"]
    assert -serve["search_bare_http"]["p99_ms"] < over_bare < serve["search_http"]["p99_ms"]
    for part in ("concurrent_write", "concurrent_session_put", "concurrent_session_append"):
        assert serve[part]["p99_ms"] >= serve[part]["p50_ms"] > 0
    # Writes are set against the bare endpoint's writes; puts and appends against its own
    # session put and append, the same I/O done the least way.
    measures = {c["measure"]: c for c in serve["comparisons"]}
    # The search is also set against a bare route around the same recall (the bench checks
    # that it finds what the recall in process finds).
    search = measures["search p50, HTTP"]
    assert search["ours"] == serve["search_http"]["p50_ms"]
    assert search["raw"] == serve["search_bare_http"]["p50_ms"]
    assert search["baseline"] == "bare FastAPI route around the same recall"
    writes = measures["writes/s, 16 clients (HTTP)"]
    assert writes["raw"] == serve["bare_http_writes_per_s"]
    assert writes["baseline"] == "bare FastAPI endpoint to Kafka"
    for measure, bare in (("puts", "put"), ("appends", "append")):
        compared = measures[f"session {measure}/s, 16 clients (HTTP)"]
        assert compared["raw"] == serve[f"bare_session_{measure}_per_s"]
        assert compared["baseline"] == f"bare FastAPI session {bare}: GET, send to Kafka, SET"
        assert serve[f"concurrent_bare_session_{bare}"]["p50_ms"] > 0
    # The store API's session events, against the bare endpoint's; compaction against its
    # own I/O in process.
    events = measures["store session events/s, 16 clients (HTTP)"]
    assert events["ours"] == serve["store_session_events_per_s"] > 0
    assert events["raw"] == serve["bare_store_session_events_per_s"] > 0
    assert serve["concurrent_store_session_event"]["p50_ms"] > 0
    compact = measures["compact p50, 40 memories"]
    assert compact["ours"] == serve["compact"]["p50_ms"] > 0
    assert compact["raw"] == serve["compact_raw_read_and_send"]["p50_ms"] > 0


def test_bench_load_audits_the_log_against_the_projection(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    args = ["--threads", "3", "--seconds", "5", "--thread-turns", "20"]
    done = memstream(env, "bench", "load", *args, "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    load = json.loads(done.stdout)["results"]["load"]
    assert load["turns_completed"] == 60
    assert load["events_in_log"] == 61  # and the worker's probe
    assert (load["lost"], load["doubled"]) == (0, 0)
    assert load["lag_series"] and load["lag_series"][-1][1] == 0  # caught up at the end
    assert load["turn_with_memory"]["p99_ms"] > 0


def test_bench_replay_drives_the_real_replayer_against_consume_and_writes(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    done = memstream(env, "bench", "replay", "--events", "40", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    replay = json.loads(done.stdout)["results"]["replay"]
    for field in ("events_per_s", "raw_events_per_s", "reembed_events_per_s"):
        assert replay[field] > 0
    assert replay["ratio"] == pytest.approx(
        replay["events_per_s"] / replay["raw_events_per_s"], 0.01
    )


def test_bench_freshness_measures_both_loads_against_raw_in_rounds(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    done = memstream(
        env, "bench", "freshness", "--light", "3", "--high-seconds", "1", "--rate", "12",
        "--freshness-rounds", "2", "--out", str(tmp_path), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    fresh = json.loads(done.stdout)["results"]["freshness"]
    assert (fresh["rounds"], fresh["high_rate_turns_per_s"]) == (2, 12)
    assert fresh["light"]["samples"] == 2 * 3 and fresh["high"]["samples"] == 2 * 12
    for load in ("light", "high"):
        figures = fresh[load]
        assert 0 < figures["p50_ms"] <= figures["p99_ms"]
        assert 0 < figures["raw_p50_ms"] <= figures["raw_p99_ms"]
        for stat in ("p50", "p99"):
            low, median, high = (figures[f"{stat}_ratio{end}"] for end in ("_min", "", "_max"))
            assert 0 < low <= median <= high
    # Every turn is embedded on this machine: it cannot cost the machine nothing.
    assert fresh["high_machine_cpu_ms_per_turn"] > 0
    assert fresh["raw_high_machine_cpu_ms_per_turn"] > 0
    assert done.stderr.count("raw, 12 turns at 12/s") == 2  # each round measured both sides


def test_bench_throughput_measures_the_worker_against_raw_in_rounds(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    done = memstream(
        env, "bench", "throughput", "--turns", "12", "--throughput-rounds", "2",
        "--out", str(tmp_path), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    tput = json.loads(done.stdout)["results"]["throughput"]
    assert (tput["turns"], tput["rounds"], tput["memories"]) == (12, 2, 48)
    for field in ("turns_per_s", "raw_turns_per_s", "embedder_turns_per_s"):
        assert tput[field] > 0
    assert 0 < tput["ratio_min"] <= tput["ratio"] <= tput["ratio_max"]
    assert 0 < tput["ratio_to_embedder_min"] <= tput["ratio_to_embedder"]
    assert tput["ratio_to_embedder"] <= tput["ratio_to_embedder_max"]
    assert tput["pooled_ratio"] == pytest.approx(
        tput["turns_per_s"] / tput["raw_turns_per_s"], 0.01
    )
    assert done.stderr.count("the raw pipeline") == 2  # each round measured both sides
    assert tput["redis_cpu_ms_per_turn"] > 0 and tput["raw_redis_cpu_ms_per_turn"] > 0
    # Each side's own CPU a turn: every side embeds, so each spent some; the worker is part of
    # memstream's side (the bench's process publishes and polls beside it).
    assert 0 < tput["worker_cpu_ms_per_turn"] <= tput["cpu_ms_per_turn"]
    assert tput["raw_cpu_ms_per_turn"] > 0 and tput["embedder_cpu_ms_per_turn"] > 0


def test_bench_encryption_measures_sealed_against_plaintext_in_one_run(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    args = ["--enc-turns", "60", "--enc-events", "40", "--enc-rounds", "2"]
    done = memstream(env, "bench", "encryption", *args, "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["results"]["encryption"]
    for side in ("on", "off"):
        assert result[f"hook_p99_ms_{side}"] > 0
        assert result[f"projection_events_per_s_{side}"] > 0
        assert result[f"replay_events_per_s_{side}"] > 0
    assert result["replay_ratio"] == pytest.approx(
        result["replay_events_per_s_on"] / result["replay_events_per_s_off"], 0.01
    )


def test_bench_lineage_measures_with_against_without_in_one_run(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    args = ["--lineage-turns", "60", "--lineage-events", "300"]
    done = memstream(env, "bench", "lineage", *args, "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["results"]["lineage"]
    for side in ("with", "without"):
        assert result[f"hook_p99_ms_{side}"] > 0
        assert result[f"projection_memories_per_s_{side}"] > 0
    # Each memory's hash holds its provenance on one side only: more bytes, by a field's worth.
    extra = result["bytes_per_memory_with"] - result["bytes_per_memory_without"]
    assert 20 < extra < 200, result
    assert result["bytes_ratio"] == pytest.approx(
        result["bytes_per_memory_with"] / result["bytes_per_memory_without"], 0.01
    )


def test_bench_echo_keeps_restatements_out_with_echo_control_and_not_without(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    args = ["--echo-tenants", "1", "--echo-turns", "40", "--echo-bound", "30"]
    done = memstream(env, "bench", "echo", *args, "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["results"]["echo"]
    assert result["stored_on"] == result["stored_off"] == 30  # the bound is reached both ways
    assert result["restated_share_on"] <= 0.05 and result["facts_lost_to_echoes_on"] == 0
    assert result["restated_share_off"] > 0.1  # the same script stores its echoes without


def test_bench_extract_with_a_stub_model_measures_what_extraction_costs_memstream(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    args = ["--extract-stub", "0.05", "--extract-turns", "2", "--extract-probes", "2"]
    args += ["--extract-data", str(data)]
    done = memstream(env, "bench", "extract", *args, "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["results"]["extract"]
    assert (result["model"], result["stub_latency_s"], result["local_test_model"]) == (
        "stub", 0.05, False,
    )  # fmt: skip
    # The stub answers one fact a turn, its first words: grounded, all JSON, all extracted.
    assert result["model_facts_per_turn"] == 1.0 and result["model_json_share"] == 1.0
    assert result["model_grounded_share"] == 1.0 and result["job_extracted"] == 2
    assert result["job_busy_freshness_p99_ms"] > 0


def test_bench_locomo_extract_measures_recall_with_the_facts_against_the_turns_alone(
    settings: object, env: dict[str, str], tmp_path: Path
) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_LOCOMO))
    args = ["--data", str(data), "--extract", "--extract-per-conversation", "2"]
    # A configured model: here a stub that answers each turn's first words as one fact.
    with stub_chat(0.01) as url:
        chat = {"MEMSTREAM_CHAT_BASE_URL": url, "MEMSTREAM_CHAT_MODEL": "stub"}
        done = memstream({**env, **chat}, "bench", "locomo", *args, "--out", str(tmp_path),
                         "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    locomo = json.loads(done.stdout)["results"]["locomo"]
    assert locomo["extraction"] == {
        "model": "stub", "local_test_model": False, "turns": 2, "failed": 0, "facts": 2,
        "input_tokens": 800, "output_tokens": 80,
        "turns_per_s": locomo["extraction"]["turns_per_s"],
    }  # fmt: skip
    # The same questions through the same recall, with the facts and without them; a fact
    # counts as its turn, so with three turns everything is in both top tens.
    turns_only = locomo["baselines"]["memstream turns only"]
    assert locomo["recall@10"] == turns_only["recall@10"] == 1.0
    assert 0.0 <= locomo["baselines"]["redis bm25 (index-wide)"]["recall@10"] <= 1.0
    compared = {c["measure"] for c in locomo["comparisons"]}
    assert compared >= {"recall@5 with extracted facts", "hit@1 with extracted facts"}
