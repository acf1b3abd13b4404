# `make test` and `make run` bootstrap everything they need into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.bolide-installed

.PHONY: test run lint typecheck contracts unit unit-pure bench clean

PYX := $(shell find src/bolide -name "*.pyx" -o -name "*.pxi")

# The editable install also compiles the hot path and generates the 5.x protocol modules
# (setup.py): a changed .pyx or generator re-runs it.
$(STAMP): pyproject.toml setup.py tools/generate_proto.py $(PYX)
	command -v java >/dev/null || { apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless; }
	test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq chromium; }
	command -v etcd >/dev/null || { apt-get update -qq && apt-get install -y -qq etcd-server; }
	test -x /usr/bin/prometheus || { apt-get update -qq && apt-get install -y -qq prometheus; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	# rocketmq (C++ 4.x client) and rocketmq-python-client (5.x SDK) share the package name
	# `rocketmq`; the SDK needs its own __init__.py, which the other's empty one may replace.
	$(BIN)/python -c "from rocketmq import ClientConfiguration" 2>/dev/null || \
		$(BIN)/python -m pip install --quiet --no-deps --force-reinstall 'rocketmq-python-client==5.1.2'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

# Two workers (pytest-xdist) on the two cores: most tests wait on sockets, timers and child
# processes, not on the CPU (19 min on one worker, 11 on two). tests/conftest.py keeps the Spark
# tests on one worker (one local Spark per worker). Run one module with plain `pytest FILE`.
PARALLEL := -n 2 --dist loadgroup
# A bound on a whole pytest run, a backstop. Each test has its own (300 s, pyproject.toml), and
# after a worker crash pytest-xdist 3.8.0's loadgroup mode could wait forever (a test that
# aborts its worker once: 3 runs in 7 hung; docs/benchmarks.md) until the suite's scheduler
# mended it (tests/suite/crash_safe_scheduling.py). Past the bound the run is ended and said
# so, instead of running into CI's limit.
BOUNDED = timeout --kill-after=30 $(1) $(2) || { status=$$?; \
	if [ $$status -ge 124 ]; then echo "pytest did not end within $(1) s: ended (see Makefile, BOUNDED)"; fi; \
	exit $$status; }

unit: $(STAMP)
	$(call BOUNDED,2700,$(BIN)/pytest $(PARALLEL))

# The suites of the compiled layers again on their pure-Python twins (issue 14: CI runs both).
unit-pure: $(STAMP)
# The real clients' suite (C++ rocketmq==0.4.4, 5.x SDK) runs here too: "passes in both modes"
# (~3 min, mostly waiting on the clients' timers, not CPU).
	$(call BOUNDED,1200,env BOLIDE_PURE_PYTHON=1 $(BIN)/pytest $(PARALLEL) -q tests/protocol \
		tests/store tests/remoting tests/client/test_producer.py \
		tests/client/test_producer_batching.py tests/client/test_results_twins.py \
		tests/spark/test_records.py tests/spark/test_sink_rows.py tests/compat)

test: lint typecheck contracts unit unit-pure

run: $(STAMP)
	$(BIN)/bolide standalone

bench: $(STAMP)
	$(BIN)/python bench/codec.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build
	find src/bolide \( -name "*.so" -o -name "_compiled.c" \) -delete
