# `make demo` runs %%kvbench on the embedded tiny model; `make test` runs the test suite;
# `make check` runs the gates: lint, format, types and the architecture contract.
# `make gpu-check` checks on a CUDA GPU what the tests can only fake (a dry run without one), in the current Python.
# Each transformers line gets its own virtual environment: `make test TRANSFORMERS=4.55.4`.
# torch is pinned to the CPU build that installs in seconds; kvmagic itself accepts any torch >= 2.1.

PYTHON ?= python3
TRANSFORMERS ?= 5
TORCH ?= 2.13.0

ifeq ($(TRANSFORMERS),5)
TRANSFORMERS_SPEC := transformers>=5,<6
else
TRANSFORMERS_SPEC := transformers==$(TRANSFORMERS)
endif

VENV := .venv/tf$(TRANSFORMERS)
STAMP := $(VENV)/.installed

.PHONY: demo test check gpu-check clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check "torch==$(TORCH)" "$(TRANSFORMERS_SPEC)" -e ".[test,check]"
	touch $@

demo: $(STAMP)
	KVMAGIC_MODEL=tiny $(VENV)/bin/ipython --colors=nocolor examples/kvbench.ipy

test: $(STAMP)
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

gpu-check:
	PYTHONPATH=. $(PYTHON) benchmarks/gpu_check.py

clean:
	rm -rf .venv build *.egg-info
