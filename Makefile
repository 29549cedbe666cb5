PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
STAMP_BENCH := $(VENV)/.installed-bench

.PHONY: run demo install-service uninstall-service test test-stress check lint types pytest bench \
	soak clean \
	instructions \
	clients clients-best-effort clients-latest reliability-report browser sqlite3-cli

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(STAMP_RUN)

$(STAMP_BENCH): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $@ $(STAMP_TEST) $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/kirod

# The fake Kiro service and a kirod on temporary paths, with a demo account and key, and what to
# point curl, the SDKs, Claude Code, Codex and opencode at; Ctrl-C ends it. The same as `kirod demo`
# (runtime dependencies only); `make demo ARGS=--check` answers one request and exits, and
# `ARGS=--chat-completions` serves Chat Completions too and prints an IDE's settings.
demo: $(STAMP_RUN)
	$(BIN)/kirod demo $(ARGS)

# kirod from this checkout's .venv as a per-user service (systemd or launchd).
install-service: $(STAMP_RUN)
	$(BIN)/kiroctl service install

uninstall-service: $(STAMP_RUN)
	$(BIN)/kiroctl service uninstall

lint: $(STAMP_TEST)
	$(BIN)/ruff check kirod tests bench
	$(BIN)/ruff format --check kirod tests bench

types: $(STAMP_TEST)
	$(BIN)/mypy --strict kirod
	$(BIN)/mypy --strict bench

check: lint types

# The real clients tests/clients drives, at the versions in tests/clients/versions.json: Claude
# Code, Codex, opencode, Kilo Code, Cline, Continue, Copilot CLI, Gemini CLI and pi from npm
# (`npm ci`); aider, llm, the OpenAI Agents SDK and the Claude Agent SDK from PyPI (a venv each,
# `pip --require-hashes`); installed once into .cache/clients.
clients: $(STAMP_TEST)
	$(BIN)/python -m tests.clients.install

# What `make test` runs: without npm or its registry it says why and goes on; the client tests
# then skip with that reason.
clients-best-effort: $(STAMP_TEST)
	-@$(BIN)/python -m tests.clients.install --best-effort

# The client tests against the newest published version of each client, and how each client's
# requests differ from the pinned one's captures (not part of `make test`).
clients-latest: $(STAMP_TEST)
	$(BIN)/python -m tests.clients.latest

# Debian's Chromium for tests/console (Playwright drives it; never `playwright install`, whose CDN
# CI cannot reach). Best effort: without apt or root it says why and goes on; the console tests
# then skip with that reason (.cache/browser/why).
browser:
	-@sh tests/console/install_browser.sh

# Debian's sqlite3 command, whose `.recover` `kiroctl db recover` tries first. Best effort, as the
# browser: without it (or where its .recover fails, as 3.40's does here) recover reads row by row,
# and tests/reliability/test_damaged_db.py skips the .recover path with the reason.
sqlite3-cli:
	-@command -v sqlite3 >/dev/null || apt-get install -y -q sqlite3 >/dev/null 2>&1 || echo "sqlite3 not installed (needs apt and root); kiroctl db recover reads row by row"

# One pytest worker per core; each test module runs whole on one worker (its daemon and fake are
# module fixtures). PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2

pytest: $(STAMP_TEST) clients-best-effort browser sqlite3-cli
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile

test: check pytest

# The suite STRESS_RUNS times in a row on a loaded machine: stress-ng (Debian's, installed when
# missing) keeps every core busy while PYTEST_WORKERS workers run it; the first failing run stops
# it. A test that fails here and not in `make test` waits on time instead of on a condition.
STRESS_RUNS ?= 3

test-stress: $(STAMP_TEST) clients-best-effort browser
	@command -v stress-ng >/dev/null || { apt-get update -q && apt-get install -y -q stress-ng; }
	@stress-ng --cpu $$(nproc) --timeout 4h --quiet & hog=$$!; \
	trap 'kill $$hog 2>/dev/null' EXIT INT TERM; \
	for run in $$(seq $(STRESS_RUNS)); do \
		echo "stress run $$run of $(STRESS_RUNS) (stress-ng on $$(nproc) cores)"; \
		$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile || exit 1; \
	done

# The full benchmark (several minutes; see bench/README.md). `make test` runs a smoke plan of it.
bench: $(STAMP_BENCH)
	$(BIN)/python -m bench --plan full --json bench/results-latest.json

# Instructions per stage of a 90 KB request, counted by callgrind (see bench/README.md).
instructions: $(STAMP_BENCH)
	command -v valgrind >/dev/null || apt-get install -y -q valgrind
	$(BIN)/python -m bench.instructions

# A longer soak than the one in `make test`: steady mixed load, then leak checks.
soak: $(STAMP_BENCH)
	$(BIN)/python -m bench.soak --duration 600 --concurrency 32

# Rewrites the figures in docs/RELIABILITY.md from a green run of tests/reliability.
reliability-report: $(STAMP_TEST)
	KIROD_RELIABILITY_REPORT=1 $(BIN)/pytest -q tests/reliability

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache
