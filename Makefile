# The two commands a newcomer needs: `make demo` and `make test`. Both install what is missing.
.PHONY: install up down status worker demo lint typecheck test images test-containers clean

BIN := .venv/bin

install:
	@bash infra/install.sh

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

lint: install
	@$(BIN)/ruff check src tests
	@$(BIN)/ruff format --check src tests

typecheck: install
	@$(BIN)/mypy

test: up lint typecheck
	@$(BIN)/pytest -q

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
