# The two commands a newcomer needs: `make demo` and `make test`. Both install what is missing:
# `make demo` only what the stack and the demo use, `make test` also the test tools.
.PHONY: install install-dev up down status worker demo lint typecheck test test-cluster chaos fuzz images test-containers clean

BIN := .venv/bin
# pytest-xdist processes, each with its own namespace, worker and server (tests/integration);
# a test file runs whole in one, so its module fixtures (and the secured stack) start once,
# and the longest files are handed out first (tests/conftest.py, LONGEST_FIRST). Four on 2
# cores: much of the suite waits on Kafka, Redis and the processes it starts (pytest 214 s;
# three gave 241-244 s, five 247 s: docs/operations.md).
TEST_WORKERS ?= 4

install:
	@bash infra/install.sh

install-dev:
	@bash infra/install.sh dev

up: install
	@$(BIN)/memstream up

down:
	@if [ -x $(BIN)/memstream ]; then $(BIN)/memstream down; fi

status:
	@$(BIN)/memstream status

worker: install
	@$(BIN)/memstream worker

demo: install
	@$(BIN)/memstream up --worker
	@$(BIN)/memstream demo

lint: install-dev
	@$(BIN)/ruff check src tests bench/src
	@$(BIN)/ruff format --check src tests bench/src

typecheck: install-dev
	@$(BIN)/mypy

# ruff first (a second); mypy beside the suite (~15 s of one core from a fresh clone, its
# output shown after pytest's); the target fails if any of them does.
test: install-dev up lint
	@typed=$$(mktemp); $(BIN)/mypy > "$$typed" 2>&1 & mypy=$$!; \
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not cluster"; \
	tests=$$?; wait $$mypy; typing=$$?; cat "$$typed"; rm -f "$$typed"; \
	[ $$tests -eq 0 ] && [ $$typing -eq 0 ]

# The tests on a three-broker, three-shard local cluster they start themselves (marker
# `cluster`: tests/integration/test_cluster_faults.py and test_broker_loss.py, the installed
# wheel's cluster in test_wheel.py, `bench scale`'s smoke test). Not in
# `make test`: they are a CI step of their own (.ci/run), each a few minutes of JVMs.
# CLUSTER_RUNS=3 runs them three times in a row, stopping at the first failure.
CLUSTER_RUNS ?= 1
test-cluster: install-dev
	@for run in $$(seq $(CLUSTER_RUNS)); do \
	  echo "==> cluster fault tests, run $$run of $(CLUSTER_RUNS)"; \
	  $(BIN)/pytest -q -m cluster tests/integration || exit 1; done

# Random faults under load for MINUTES on a cluster of its own (docs/reliability.md): SEED
# replays a run (each run prints its seed first); without one a seed is drawn. Exit 1 on any
# defect. `make test-cluster` runs a short one with a fixed seed (tests/integration/test_chaos.py).
SEED ?=
MINUTES ?= 10
chaos: install-dev
	@$(BIN)/memstream bench chaos $(if $(SEED),--seed $(SEED)) --minutes $(MINUTES)

# The property-based and schema fuzz tests, randomised and FUZZ_FACTOR (20) times longer than in
# `make test`, where they are derandomised (tests/fuzzing.py; docs/operations.md, "Fuzzing").
fuzz: install-dev up
	@MEMSTREAM_FUZZ=1 $(BIN)/pytest -q -m fuzz

# Container images (infra/images/build.sh: podman or docker, whichever answers; sizes at the
# end). infra/images/podman.sh sets up podman where there is no Docker, as CI does.
images: install
	@bash infra/images/build.sh

# The compose deployment and the pytest plugin on containers (docs/operations.md). podman's
# socket is used where DOCKER_HOST is unset and no Docker socket exists.
test-containers: images
	@if [ -z "$${DOCKER_HOST:-}" ] && [ ! -S /var/run/docker.sock ] && [ -S /run/podman/podman.sock ]; then \
	  export DOCKER_HOST=unix:///run/podman/podman.sock; fi; \
	TESTCONTAINERS_RYUK_DISABLED=true TESTCONTAINERS_CONNECTION_MODE=docker_host \
	$(BIN)/pytest -q tests/containers

clean: down
	rm -rf .run
