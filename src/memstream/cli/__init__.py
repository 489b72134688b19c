"""The `memstream` command line: up/down/status, worker, import, recall, forget, replay,
verify, stats, tail, demo."""
