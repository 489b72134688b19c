"""A user's test against memstream's HTTP API, on the plugin's stack started with
--memstream-server: `server_url` and an admin `api_key`."""

import httpx


def test_a_record_written_through_the_api_is_found(memstream_stack, memstream_tenant):
    headers = {"Authorization": f"Bearer {memstream_stack.api_key}"}
    record = {
        "id": "porto-1",
        "text": "We moved the office to Porto.",
        "namespace": memstream_tenant,
    }
    with httpx.Client(base_url=memstream_stack.server_url, headers=headers, timeout=60) as http:
        written = http.post("/v1/long-term-memory/?wait=true", json={"memories": [record]})
        assert written.status_code == 200, written.text
        found = http.post(
            "/v1/long-term-memory/search",
            json={"text": "where is the office?", "namespace": {"eq": memstream_tenant}},
        ).json()
    assert [m["text"] for m in found["memories"]][:1] == [record["text"]]
