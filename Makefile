# `make demo` runs %%kvbench on the embedded tiny model, installing only what kvmagic needs; `make test` runs the
# test suite, adding the test and lint tools;
# `make check` runs the gates: lint, format, types and the architecture contract.
# `make docs` regenerates docs/options.md and docs/columns.md from the option table and the column registry.
# `make mutants` mutation-tests core/, results/ and the runner's arithmetic ([tool.mutmut] in pyproject.toml; not in
# CI: hours on two cores), in its own .venv/mutmut; `make mutants MUTANTS='kvmagic.core.*'` runs a part of them.
# `make gpu-check` checks on a CUDA GPU what the tests can only fake (a dry run without one), in the current Python.
# Each transformers line gets its own virtual environment: `make test TRANSFORMERS=4.55.4`.
# torch is pinned to the CPU build that installs in seconds.
# `make test FLOORS=1` tests the lowest versions pyproject.toml declares instead (.ci/floors.py pins
# them), in .venv/floors; its torch floor exists on PyPI only as a CUDA build (about 3 GB to install).
# `make test PRESS=1` adds the press extra (kvpress) in .venv/press-tf$(TRANSFORMERS), with a transformers
# kvpress accepts (5.2.0 unless TRANSFORMERS says), and fails the press tests rather than skip them.

PYTHON ?= python3
PRESS ?=
ifeq ($(PRESS),1)
TRANSFORMERS ?= 5.2.0
else
TRANSFORMERS ?= 5
endif
TORCH ?= 2.13.0
FLOORS ?=
comma := ,
EXTRAS := test,check$(if $(filter 1,$(PRESS)),$(comma)press)

ifeq ($(TRANSFORMERS),5)
TRANSFORMERS_SPEC := transformers>=5,<6
else
TRANSFORMERS_SPEC := transformers==$(TRANSFORMERS)
endif

ifeq ($(FLOORS),1)
VENV := .venv/floors
PINS := $(VENV)/floors.txt
else ifeq ($(PRESS),1)
VENV := .venv/press-tf$(TRANSFORMERS)
PINS := $(VENV)/pins.txt
else
VENV := .venv/tf$(TRANSFORMERS)
PINS := $(VENV)/pins.txt
endif
BASE := $(VENV)/.base
STAMP := $(VENV)/.installed

.PHONY: demo test test-floors check docs gpu-check mutants clean

# kvmagic and what it needs to run: all the demo installs.
$(BASE): pyproject.toml Makefile .ci/floors.py
	$(PYTHON) -m venv $(VENV)
ifeq ($(FLOORS),1)
	$(PYTHON) .ci/floors.py > $(PINS)
else
	printf '%s\n' "torch==$(TORCH)" "$(TRANSFORMERS_SPEC)" > $(PINS)
endif
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r $(PINS) -e .
	touch $@

# The test and lint tools on top, for `make test` and `make check`.
$(STAMP): $(BASE)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r $(PINS) -e ".[$(EXTRAS)]"
	touch $@

demo: $(BASE)
	KVMAGIC_MODEL=tiny $(VENV)/bin/ipython --colors=nocolor examples/kvbench.ipy

test: $(STAMP)
	$(if $(filter 1,$(PRESS)),KVMAGIC_PRESS=required) $(VENV)/bin/python -m pytest $(PYTEST_ARGS)

test-floors:
	$(MAKE) test FLOORS=1

check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

docs: $(STAMP)
	$(VENV)/bin/python tools/docs_pages.py

# mutmut 3.8 reads a test's node id where pytest 9 no longer keeps it; mypy runs in it to set aside the mutants
# `make check` would reject. One worker, niced: a machine shared with other work stays usable.
MUTVENV ?= .venv/mutmut
MUTANTS ?=
$(MUTVENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(MUTVENV)
	$(MUTVENV)/bin/pip install --quiet --disable-pip-version-check "torch==$(TORCH)" "transformers>=5,<6" \
		-e ".[test,check]" "mutmut==3.8" "pytest<9"
	touch $@

mutants: $(MUTVENV)/.installed
	PATH="$(abspath $(MUTVENV))/bin:$$PATH" nice -n 10 $(MUTVENV)/bin/mutmut run --max-children 1 $(MUTANTS)
	$(MUTVENV)/bin/mutmut results

gpu-check:
	PYTHONPATH=. $(PYTHON) benchmarks/gpu_check.py

clean:
	rm -rf .venv build *.egg-info
