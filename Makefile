# The two commands of the README: `make run` and `make test`. Everything else is set up by them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)

.PHONY: run test venv lock clean

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Concord needs Python 3.11 or newer")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -r requirements.txt
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/python scripts/run.py

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Re-pin requirements.txt from requirements.in (maintainers only).
lock:
	rm -rf /tmp/concord-lock && $(PYTHON) -m venv /tmp/concord-lock
	/tmp/concord-lock/bin/pip install -q -r requirements.in
	/tmp/concord-lock/bin/pip freeze --exclude-editable > requirements.txt

clean:
	rm -rf $(VENV) var
