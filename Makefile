# The two commands of the README: `make run` and `make test`. Everything else is set up by them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The venv gets the development lock (runtime + test tools); the Docker image only the runtime
# lock (requirements/base.txt). Both are full locks with hashes: installed with --no-deps, so
# that rapidocr's declared opencv-python (GUI build, needs libGL) never lands next to the
# headless wheel (see requirements/base.in).
LOCK   := requirements/dev.txt
STAMP  := $(VENV)/.installed-$(shell cksum $(LOCK) | cut -d' ' -f1)
PIP    := $(BIN)/python -m pip install --disable-pip-version-check -q --no-deps --require-hashes

.PHONY: run test lint venv lock clean

$(STAMP): $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Concord needs Python 3.11 or newer")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -r $(LOCK)
	@$(BIN)/python -c 'import cv2, django, rest_framework, celery' || (echo "installed packages do not import" && exit 1)
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/python scripts/run.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

# Test processes (pytest-xdist; 0 = one process). README "Tests".
PYTEST_WORKERS ?= 3

test: lint
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# Re-pin both locks from requirements/*.in (maintainers only; needs the package index).
lock: $(STAMP)
	cd requirements && ../$(BIN)/pip-compile -q --generate-hashes --strip-extras --unsafe-package opencv-python \
		--output-file base.txt base.in
	cd requirements && ../$(BIN)/pip-compile -q --generate-hashes --strip-extras --unsafe-package opencv-python \
		--output-file dev.txt dev.in

clean:
	rm -rf $(VENV) var
