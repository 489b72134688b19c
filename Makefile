# The two commands a newcomer needs: `make demo` and `make test`. Both install what is missing.
.PHONY: install up down status worker demo lint typecheck test fuzz clean

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

# The property-based and schema fuzz tests, randomised and FUZZ_FACTOR (20) times longer than in
# `make test`, where they are derandomised (tests/fuzzing.py; docs/operations.md, "Fuzzing").
fuzz: up
	@MEMSTREAM_FUZZ=1 $(BIN)/pytest -q -m fuzz

clean: down
	rm -rf .run
