"""The `memstream` command line (up/down/status, worker, import, recall, demo)."""
