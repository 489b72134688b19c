# The two commands a newcomer needs: `make demo` and `make test`. Both install what is missing.
.PHONY: install up down status worker demo lint typecheck test clean

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

clean: down
	rm -rf .run
