# Entry points. Offline: setup, test, mutate, plan (PREVIEW=1: as `pulumi preview`). Real account:
# preflight, up, destroy, benchmark, results, sweep.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STACK  ?=
STACKS := $(patsubst stacks/Pulumi.%.yaml,%,$(wildcard stacks/Pulumi.*.yaml))

.PHONY: setup test mutate plan plan-all preflight up destroy sweep benchmark results check-stack

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

test: setup
	$(PY) -m pytest -q

# Mutation testing of stackconfig/ with mutmut (setup.cfg [mutmut]; README "Mutation testing"):
# a fresh run every time (survivors are not retested when tests change), then the score, which
# fails under 90 % (tools/mutation_score.py; equivalents in docs/mutation-equivalents.md).
# Measured: MUTATE_DURATION on 2 cores. mutmut is installed here only, not by `make setup`.
MUTATE_JOBS ?= 2

$(VENV)/.installed-mutate: $(VENV)/.installed requirements-mutate.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-mutate.txt
	touch $@

mutate: $(VENV)/.installed-mutate
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children $(MUTATE_JOBS)
	$(PY) -m tools.mutation_score

check-stack:
	@test -n "$(STACK)" || { echo "set STACK=<name>; stacks: $(STACKS)"; exit 2; }

plan: setup check-stack
	$(PY) -m offline.plan --stack $(STACK) $(if $(PREVIEW),--preview)

plan-all: setup
	@for s in $(STACKS); do $(PY) -m offline.plan --stack $$s > /dev/null || exit $$?; echo "planned $$s"; done

# Read-only checks with your credentials (exit 1 on a FAIL); JSON=1 for machine-readable output.
preflight: setup check-stack
	$(PY) -m tools.preflight --stack $(STACK) $(if $(JSON),--json)

# Preflight first; a FAIL stops here. SKIP_PREFLIGHT=1 goes straight to pulumi up.
up: setup check-stack
	$(if $(filter 1,$(SKIP_PREFLIGHT)),@echo "preflight skipped (SKIP_PREFLIGHT=1)",$(PY) -m tools.preflight --stack $(STACK))
	pulumi up --stack $(STACK)

# pulumi destroy, then a sweep of the stack's region for what Karpenter or EKS left behind.
destroy: setup check-stack
	$(PY) -m tools.destroy --stack $(STACK)

benchmark: setup check-stack
	$(PY) -m tools.rerun_benchmark --stack $(STACK)

# RUN=<run id> (default: the latest), BUCKET=<name> (default: the stack's modelBucket output).
results: setup check-stack
	$(PY) -m tools.fetch_results --stack $(STACK) $(if $(RUN),--run-id $(RUN)) $(if $(BUCKET),--bucket $(BUCKET))

sweep: setup check-stack
	$(PY) -m tools.sweep --stack $(STACK)
