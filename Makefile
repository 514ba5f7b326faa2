# Tidal: the two commands a new user needs.
#   make demo   set up .venv, then run the demo pipeline (Spark local mode, SQLite buffers)
#   make test   set up .venv, then ruff, import-linter, mypy and the whole pytest suite
#               (unit tests on every core with pytest-xdist, then the integration tests two at a time)
#   make test-under-load   the unit and integration tests on a box at half speed, RUNS times in a row
# Each target creates or refreshes .venv by itself; packages are re-installed only when
# pyproject.toml or constraints.txt changed.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(abspath $(VENV))/bin/python
STAMP := $(VENV)/.installed

# Spark's Python workers must run the venv's interpreter, and nothing should listen beyond loopback.
export PYSPARK_PYTHON := $(VPY)
export PYSPARK_DRIVER_PYTHON := $(VPY)
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: demo test test-under-load lint unit integration bench check-java check-browser check-loadgen check-fuse venv cds pyc clean

# Each pytest run ends with its 15 slowest tests; Spark's noise stays in the runs' log files.
PYTEST := $(VPY) -m pytest -q --durations=15
# The integration tests in two workers: most of them wait (triggers, JVM starts, elections) more
# than they compute. The modules that start clusters and multi-host rigs share one worker and run
# one after the other (tests/integration/conftest.py). The times measured both ways are in
# docs/testing.md.
INTEGRATION := $(PYTEST) -n 2 --dist loadgroup tests/integration
RUNS ?= 3
LOAD ?= throttle
SPEED ?= 50

demo: $(STAMP) check-java cds pyc
	$(VENV)/bin/tidal demo

test: $(STAMP) check-java cds pyc check-browser check-loadgen check-fuse lint
	$(PYTEST) -n 2 tests/unit
	$(INTEGRATION)

# Proof that no test depends on the box's speed: the unit and integration tests on a box at SPEED
# percent (50: half), RUNS times in a row. By default every process the tests start runs in a
# cgroup allowed SPEED % of the cores (tests/load/throttle.py: exact, and the same on any box; it
# needs root and the cgroup cpu controller). LOAD=hogs runs them beside two busy CPU hogs instead
# (tests/load/hogs.py, stopped by PID whatever happens), which slows a box by less, and by how much
# depends on the box. The unit tests' time is the slowed box's speed (docs/testing.md).
test-under-load: $(STAMP) check-java cds pyc check-browser check-loadgen check-fuse
	@set -e; for i in $$(seq 1 $(RUNS)); do \
	  echo "== unit and integration tests under load ($(LOAD), speed $(SPEED)%): run $$i of $(RUNS)"; \
	  if [ "$(LOAD)" = "hogs" ]; then \
	    $(VPY) tests/load/hogs.py start 2 .hogs.pid; \
	    trap '$(VPY) tests/load/hogs.py stop .hogs.pid' EXIT; \
	    $(PYTEST) -n 2 tests/unit; $(INTEGRATION); \
	    $(VPY) tests/load/hogs.py stop .hogs.pid; trap - EXIT; \
	  else \
	    $(VPY) tests/load/throttle.py --speed $(SPEED) -- $(PYTEST) -n 2 tests/unit; \
	    $(VPY) tests/load/throttle.py --speed $(SPEED) -- $(INTEGRATION); \
	  fi; \
	done

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PYTEST) -n 2 tests/unit

integration: $(STAMP) check-java cds pyc check-browser check-loadgen check-fuse
	$(INTEGRATION)

bench: $(STAMP) check-java cds pyc check-loadgen
	$(VENV)/bin/tidal bench all

venv: $(STAMP)

# The class-data archive of Spark's JVMs (src/tidal/spark/cluster/cds.py): built once per JDK and Spark
# into .venv (~20 s), it takes about 2 s off every Spark session's start and its first job.
cds: $(STAMP) check-java
	@$(VPY) -m tidal.spark.cluster.cds 2>>$(VENV)/cds.log || { echo "building the class-data archive failed: see $(VENV)/cds.log" >&2; exit 1; }

# Bytecode in the PySpark zip that Spark puts first on its Python workers' path (src/tidal/spark/
# pyzip.py): compiled once (~3 s), it saves each Python worker Spark starts ~0.5 s of compiling.
pyc: $(STAMP)
	@$(VPY) -m tidal.spark.cluster.pyzip

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "Tidal needs Python >= 3.11 (found $$($(PYTHON) --version 2>&1)). Set PYTHON=/path/to/python3.11." >&2; exit 1; }
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(VPY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,numaflow]'
	@touch $(STAMP)

check-java:
	@v=$$(java -version 2>&1 | awk -F'"' '/version/ {print $$2; exit}'); \
	major=$${v%%.*}; [ "$$major" = "1" ] && major=$$(echo "$$v" | cut -d. -f2); \
	if [ -z "$$v" ] || [ "$$major" -lt 17 ] 2>/dev/null; then \
	  echo "Spark needs Java >= 17 (found: $${v:-none})." >&2; \
	  echo "Install it with:  sudo apt-get install -y openjdk-17-jre-headless" >&2; \
	  echo "(or set JAVA_HOME / PATH to a JDK 17+), then run make again." >&2; \
	  exit 1; \
	fi

# The dashboard's tests drive a real headless Chromium: Debian's, with its ChromeDriver (a test
# tool's own browser download cannot be reached from here). Installed when we are root.
check-browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then exit 0; fi; \
	if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's chromium and chromium-driver for the dashboard's browser tests"; \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver) >/dev/null || \
	  { echo "apt-get could not install chromium; run: sudo apt-get install -y chromium chromium-driver" >&2; exit 1; }; \
	else \
	  echo "The dashboard's browser tests need Chromium and its driver." >&2; \
	  echo "Install them with:  sudo apt-get install -y chromium chromium-driver" >&2; \
	  exit 1; \
	fi

# The HTTP source's benchmark (and its test) drive load with hey, Debian's HTTP load generator
# (a Python client on two cores would measure itself).
check-loadgen:
	@if command -v hey >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's hey (HTTP load generator) for the HTTP benchmark"; \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q hey) >/dev/null || \
	  { echo "apt-get could not install hey; run: sudo apt-get install -y hey" >&2; exit 1; }; \
	else \
	  echo "The HTTP benchmark needs the load generator hey." >&2; \
	  echo "Install it with:  sudo apt-get install -y hey" >&2; \
	  exit 1; \
	fi

# The power-cut tests (tests/integration/test_power_cut.py) mount a FUSE file system that drops
# what was not synced: libfuse 3 and fusermount3 from Debian's fuse3, installed when we are root.
# Without root or /dev/fuse those tests skip themselves and say why.
check-fuse:
	@if command -v fusermount3 >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's fuse3 for the power-cut tests"; \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q fuse3) >/dev/null || \
	  { echo "apt-get could not install fuse3; run: sudo apt-get install -y fuse3" >&2; exit 1; }; \
	else \
	  echo "The power-cut tests need FUSE 3: sudo apt-get install -y fuse3 (until then they skip)." >&2; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis runs .hogs.pid
