# gpumon developer and user entry points. Needs only python3 (>= 3.10) and PyPI; `make test` also installs
# Debian's prometheus (prometheus + promtool), victoria-metrics and prometheus-alertmanager packages when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# SPEC=default: gpumon's bundled example spec by name
SPEC   ?= gpumon.yaml
OUT    ?= output

.PHONY: render check test test-fast fuzz docs lint fields demo clean tools

# the stamp, not .venv/bin/gpumon, says the checkout is installed editable with the test extras: a
# `pip install .` into the same .venv (the README's user install) makes a gpumon without pytest that
# would run the copy it installed, not the checkout's code
STAMP  := $(VENV)/.gpumon-checkout
$(BIN)/gpumon: $(STAMP)
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

render: $(BIN)/gpumon            ## render rules, dashboards, rule tests and runbooks into output/ (and the golden examples)
	$(BIN)/gpumon render $(SPEC) -o $(OUT)
	for example in examples/*.yaml; do $(BIN)/gpumon render $$example -o tests/golden/$$(basename $$example .yaml) || exit; done

check: $(BIN)/gpumon             ## fail when output/ (or a golden example) is stale (the PR drift check)
	$(BIN)/gpumon render $(SPEC) -o $(OUT) --check
	for example in examples/*.yaml; do $(BIN)/gpumon render $$example -o tests/golden/$$(basename $$example .yaml) --check || exit; done

lint: $(BIN)/gpumon              ## lint output/ with the spec (SPEC=default: gpumon's bundled example spec)
	$(BIN)/gpumon lint --spec $(SPEC) $(OUT)

fields:                          ## regenerate generator/gpumon/data/dcgm_fields.json: DCGM_GIT=<NVIDIA/DCGM clone> EXPORTER_REF=<dcgm-exporter list copies>
	$(PYTHON) scripts/field_catalogue.py --dcgm-git $(DCGM_GIT) --exporter-ref $(EXPORTER_REF) > generator/gpumon/data/dcgm_fields.json.tmp
	mv generator/gpumon/data/dcgm_fields.json.tmp generator/gpumon/data/dcgm_fields.json

docs: $(BIN)/gpumon              ## regenerate docs/checks/ (one page per lint and validate check), the checks and alert tables
	$(BIN)/python -m gpumon.checkdocs

prometheus-installed:
	@command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && command -v victoria-metrics >/dev/null 2>&1 && command -v amtool >/dev/null 2>&1 && command -v chromium >/dev/null 2>&1 && command -v busybox >/dev/null 2>&1 || { \
	  echo "installing Debian's prometheus (prometheus + promtool), prometheus-alertmanager, victoria-metrics, chromium (HTML report test) and busybox (sidecar script test) packages"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager victoria-metrics chromium busybox >/dev/null; }
.PHONY: prometheus-installed

tools:                           ## build Prometheus 3.x, Thanos, Alertmanager and VictoriaMetrics + vmalert from their Go modules into ~/.cache/gpumon-tools (pinned in tools/versions.env)
	bash scripts/build-tools.sh

# make demo says what it lacks before anything else, then installs only that from apt-get (Prometheus; Chromium
# only draws the report's screenshot), or says how to do it by hand when it cannot
demo-needs:
	@command -v chromium >/dev/null 2>&1 || echo "chromium is not installed (optional: Debian's chromium package draws build/demo-report.png)"
	@[ -n "$$GPUMON_PROMETHEUS" ] || command -v prometheus >/dev/null 2>&1 || { 	  echo "make demo needs a prometheus binary (Debian's prometheus package, or GPUMON_PROMETHEUS=/path/to/prometheus)"; 	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); 	  if [ -n "$$SUDO" ] && ! command -v sudo >/dev/null 2>&1; then 	    echo "prometheus is not installed and this is not root without sudo: run 'apt-get install prometheus' as root, then make demo"; exit 2; fi; 	  echo "prometheus is not installed: running $$SUDO apt-get install --no-install-recommends prometheus"; 	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
.PHONY: demo-needs

demo: demo-needs $(BIN)/gpumon   ## simulator + real Prometheus + rendered rules + gpumon validate (needs Debian's prometheus package)
	$(BIN)/python scripts/demo.py

# the whole suite in one run, SLOW_WORKERS pytest-xdist workers for the CPU-bound tests: a module's tests on one
# engine on one worker (--dist loadgroup, tests/xdist_groups.py groups them), so its servers start once per engine,
# except modules whose tests share no server, which spread test by test; the longest modules go first and the
# fast tier's modules fill the gaps. WAIT_WORKERS more workers take only the tests that mostly wait on real time
# (live servers scraping the simulator, the live vmalert matrix, live Alertmanager runs, the fleet benchmark), so
# their idle minutes overlap the CPU-bound tests; the live vmalert matrix (about 14 min of real time) bounds the
# run. One run, not the fast tier first: both cores stay busy while the live tests wait. The CPU-bound workers run at
# a lower priority and the live Alertmanager runs at a higher one where allowed (tests/conftest.py BATCH_NICENESS,
# LIVE_NICENESS), so wall-clock scrapes and evaluations are served first. --durations=30 prints the slowest tests
SLOW_WORKERS ?= 2
WAIT_WORKERS ?= 4

test: $(BIN)/gpumon prometheus-installed tools   ## run the whole test suite (Prometheus 2.42 and 3.x, Thanos, promtool)
	$(BIN)/python -m tests.engines
	$(BIN)/python -m pytest -q -n $$(( $(SLOW_WORKERS) + $(WAIT_WORKERS) )) --wait-workers $(WAIT_WORKERS) \
	  --dist loadgroup --durations=30

# one worker more than cores: some fast tests wait on purpose (a stalled server's timeouts, a hung nvidia-smi's
# children killed, a progress line after one second); on 2 cores under light load
# 2 workers took about 120 s wall and 200 s of CPU time
test-fast: $(BIN)/gpumon         ## the fast tier: no servers, no promtool, on every core (about 200 s of CPU time on 2 cores)
	$(BIN)/python -m pytest -q -m "not slow" -n $$(( $$(nproc) + 1 ))

fuzz: $(BIN)/gpumon prometheus-installed   ## a long fuzzing run of specs, lint/diff/dashboard inputs and sidecar input (CI runs bounded slices); FUZZ_SEED=N to reproduce
	GPUMON_FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-20000} GPUMON_FUZZ_ROTATING_EXAMPLES=$${FUZZ_EXAMPLES:-20000} \
	GPUMON_FUZZ_PROMTOOL_EXAMPLES=$${FUZZ_PROMTOOL_EXAMPLES:-1000} GPUMON_FUZZ_SEED=$${FUZZ_SEED:-} \
	GPUMON_FUZZ_INPUT_EXAMPLES=$${FUZZ_INPUT_EXAMPLES:-3000} GPUMON_FUZZ_BUDGET_SECONDS=1e9 GPUMON_FUZZ_SIDECAR_EXAMPLES=$${FUZZ_SIDECAR_EXAMPLES:-500} \
	$(BIN)/python -m pytest -q -s tests/test_fuzz_spec.py tests/test_fuzz_inputs.py \
	  tests/test_sidecar_hostile.py::test_random_nvidia_smi_output_passes_promtool

clean:
	rm -rf $(VENV) .pytest_cache
