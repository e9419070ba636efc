# Entry points: `make help`. Each target wraps the operator CLI (`python -m tools <command>`), whose
# exit codes are documented (0 clear, 1 a check failed, 2 bad input); make itself reports any failing
# recipe as 2, so scripts should call the CLI. Variables reach the recipes through the environment
# and are quoted there: a value is never pasted into a shell command line.
.DEFAULT_GOAL := help
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
INFERENCE_PERF_VENV ?= .venv-inference-perf
PYTHON312 ?= python3.12
export STACK RUN BUCKET PREVIEW PREVIOUS JSON SKIP_PREFLIGHT ALLOW_OPEN_ENDPOINT PY PYTHON VENV FAULTS LOAD_GENERATOR CONCURRENCY INFERENCE_PERF_VENV PYTHON312

.PHONY: help setup test lint scan mutate plan plan-all lock rehearse preflight up destroy sweep benchmark results

help: ## list the targets
	@echo "Offline:      make setup | make plan STACK=<s> [PREVIEW=1] [PREVIOUS=<report.json|tuning.json>] | make plan-all | make lint | make test | make scan | make mutate"
	@echo "              make rehearse STACK=<s> [FAULTS=a,b] [LOAD_GENERATOR=inference-perf] [CONCURRENCY=1,2]"
	@echo "Real account: make preflight STACK=<s> [JSON=1] | make up STACK=<s> [SKIP_PREFLIGHT=1] [ALLOW_OPEN_ENDPOINT=1] | make benchmark STACK=<s>"
	@echo "              make results STACK=<s> [RUN=<run id>] [BUCKET=<bucket>] | make sweep STACK=<s> | make destroy STACK=<s>"
	@echo "              make lock STACK=<s> [REFS=\"<model>=<ref> ...\"]"
	@echo "Stacks:       $(patsubst stacks/Pulumi.%.yaml,%,$(wildcard stacks/Pulumi.*.yaml))"
	@echo "The CLI behind them: $(PY) -m tools --help"

setup: $(VENV)/.installed ## a virtualenv with every pinned dependency

# inference-perf, the second load generator (benchmark/loadgen/inference_perf.py), needs Python 3.12
# and pins transformers 5.13: a virtualenv of its own, from the hash-locked lock the benchmark pod
# installs (benchmark/requirements-inference-perf.lock). Only the tests run it (against local
# servers), so `make test` builds it, not `make setup`: the program itself never needs it here.
$(INFERENCE_PERF_VENV)/.installed: benchmark/requirements-inference-perf.lock
	@py="$$PYTHON312"; "$$py" --version >/dev/null 2>&1 || { \
		version=$$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.|$$)' | tail -n 1); \
		[ -z "$$version" ] || py="$$(pyenv root)/versions/$$version/bin/python3.12"; }; \
	"$$py" --version >/dev/null 2>&1 || { echo "make test needs Python 3.12 for inference-perf (none found as $$PYTHON312 or in pyenv): set PYTHON312=<path>" >&2; exit 2; }; \
	echo "installing inference-perf into $$INFERENCE_PERF_VENV with $$("$$py" --version) (benchmark/requirements-inference-perf.lock, hash-checked, a few minutes the first time)"; \
	"$$py" -m venv "$$INFERENCE_PERF_VENV"
	@"$$INFERENCE_PERF_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --require-hashes --no-deps \
		-r benchmark/requirements-inference-perf.lock
	@touch "$$INFERENCE_PERF_VENV/.installed"

# One pip run for both files (one resolve), every package without bytecode, then tools/bytecode.py
# byte-compiles on every core what the operator commands import (requirements.txt and its
# dependencies): a plan imports the Pulumi SDKs, and PYTHONDONTWRITEBYTECODE may be set. The rest
# needs none here: the suite keeps its own bytecode (`make test`, below). docs/development.md.
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-distributed.txt tools/bytecode.py
	@"$$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "make setup needs Python 3.11 or newer (tested with 3.11); found %d.%d: set PYTHON=python3.11" % sys.version_info[:2])'
	@echo "[1/3] creating $$VENV with $$("$$PYTHON" --version)"
	@"$$PYTHON" -m venv "$$VENV"
	@echo "[2/3] installing the pinned packages of requirements-dev.txt and requirements-distributed.txt, then byte-compiling what the program imports (about a minute the first time)"
	@"$$PY" -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-dev.txt -r requirements-distributed.txt
	@"$$PY" -m tools.bytecode
	@touch "$$VENV/.installed"
	@echo "[3/3] ready: make plan STACK=<s>, make test; the Pulumi CLI is needed only for a real account (docs/operations.md)"

lint: setup ## ruff (ruff.toml)
	@"$$PY" -m ruff check .

# One worker more than the machine has cores (pytest-xdist); TEST_WORKERS=0 runs the suite in this
# process. About a third of the suite's time is waiting, not computing (inference-perf starting, the
# distributed servers, the rehearsal's and the tuner's polls): on 2 cores a third worker computes
# while the others wait (docs/benchmarks.md: 128 s with 2 workers, 98 s with 3, 98 s with 4).
# The suite's processes keep the bytecode they compile, in build/pycache (PYTHONPYCACHEPREFIX), even
# where PYTHONDONTWRITEBYTECODE is set: without it every worker and every `python -m` the tests start
# compiled torch, transformers and sympy again (installed without bytecode: make setup), about 6 CPU s
# each, and pytest rewrote every test module again.
TEST_WORKERS ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN) + 1 )))
export TEST_WORKERS
test: lint $(INFERENCE_PERF_VENV)/.installed ## lint, then the test suite (inference-perf's virtualenv built first)
	env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$$(pwd)/build/pycache" "$$PY" -m pytest -q -n "$$TEST_WORKERS"

# checkov in a virtualenv of its own (requirements-scan.txt, every package pinned), then the scan of
# every stack's Kubernetes objects and AWS resources against security/checkov-allowlist.yaml (offline/scan.py).
SCAN_VENV ?= .venv-scan
export SCAN_VENV
scan: setup $(SCAN_VENV)/.installed ## checkov over every stack's Kubernetes objects and AWS resources, against the allowlist
	@"$$PY" -m tools scan --checkov "$$SCAN_VENV/bin/checkov"

$(SCAN_VENV)/.installed: requirements-scan.txt
	@echo "installing checkov into $$SCAN_VENV (requirements-scan.txt)"
	@"$$PYTHON" -m venv "$$SCAN_VENV"
	@"$$SCAN_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-scan.txt
	@touch "$$SCAN_VENV/.installed"

# Mutation testing (docs/development.md, "Mutation testing"): an audit, not a gate on each change. A fresh run
# every time, then the score per folder (tools/mutation_score.py). mutmut is installed here only.
MUTATE_JOBS ?= 2
export MUTATE_JOBS

$(VENV)/.installed-mutate: $(VENV)/.installed requirements-mutate.txt
	@"$$PY" -m pip install --quiet --disable-pip-version-check -r requirements-mutate.txt
	@touch "$$VENV/.installed-mutate"

mutate: $(VENV)/.installed-mutate ## mutation testing of stackconfig/, benchmark/ and reporting/ (about an hour)
	rm -rf mutants
	"$$VENV/bin/mutmut" run --max-children "$$MUTATE_JOBS"
	"$$PY" -m tools.mutation_score

plan: setup ## what `pulumi up` would create, offline: STACK=<s> [PREVIEW=1] [PREVIOUS=<a run's report.json or tuning.json>]
	@"$$PY" -m tools plan --stack "$$STACK" $${PREVIEW:+--preview} $${PREVIOUS:+--previous "$$PREVIOUS"}

plan-all: setup ## plan every stack
	@"$$PY" -m tools plan-all

lock: setup ## pin each model the stack serves to a hub commit: STACK=<s> [REFS="<model>=<ref> ..."]
	@"$$PY" -m tools lock --stack "$$STACK" $$(for r in $$REFS; do printf -- '--ref %s ' "$$r"; done)

# The rehearsal (docs/rehearsal.md): the stack's rendered pods as local processes against vLLM on CPU,
# in a virtualenv of its own (.venv-rehearse, rehearse/requirements.txt, built on first use).
rehearse: setup ## run a stack's rendered pods here against vLLM on CPU: STACK=<s> [FAULTS=a,b] [LOAD_GENERATOR=<g>] [CONCURRENCY=1,2]
	@"$$PY" -m tools rehearse --stack "$$STACK" $${FAULTS:+--faults "$$FAULTS"} $${LOAD_GENERATOR:+--load-generator "$$LOAD_GENERATOR"} \
		$${CONCURRENCY:+--concurrency "$$CONCURRENCY"}

preflight: setup ## read-only checks with your credentials: STACK=<s> [JSON=1]
	@"$$PY" -m tools preflight --stack "$$STACK" $${JSON:+--json}

up: setup ## preflight, then pulumi up: STACK=<s> [SKIP_PREFLIGHT=1] [ALLOW_OPEN_ENDPOINT=1]
	@"$$PY" -m tools up --stack "$$STACK" $${SKIP_PREFLIGHT:+--skip-preflight} $${ALLOW_OPEN_ENDPOINT:+--allow-open-endpoint}

destroy: setup ## pulumi destroy, then the sweep: STACK=<s>
	@"$$PY" -m tools destroy --stack "$$STACK"

sweep: setup ## what Karpenter or EKS left in the stack's region: STACK=<s>
	@"$$PY" -m tools sweep --stack "$$STACK"

benchmark: setup ## run the benchmark again: STACK=<s>
	@"$$PY" -m tools benchmark --stack "$$STACK"

results: setup ## fetch a run and write its report: STACK=<s> [RUN=<run id>] [BUCKET=<bucket>]
	@"$$PY" -m tools results --stack "$$STACK" $${RUN:+--run-id "$$RUN"} $${BUCKET:+--bucket "$$BUCKET"}
