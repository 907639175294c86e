# Two entry points (see README): `make demo` and `make test`. Everything else is set-up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup jars lint unit bench clean soak-brokers soak-page screenshots wheel

# ROOM=1: a workshop room (participants' laptops join over the LAN); ROOM=IP picks the address
demo: setup jars
	$(BIN)/groupscope up $(if $(ROOM),--room $(if $(filter-out 1,$(ROOM)),--room-address $(ROOM)))

# the suite in three lanes: the tests that wait for minutes by design beside the rest (tests/lanes.py)
# Bytecode first, once: where PYTHONDONTWRITEBYTECODE is set (the CI machine sets it) the ~1 000 Python
# processes a run starts would each compile groupscope's modules again (~0.2 s of CPU each).
test: setup jars
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m compileall -q -j 0 backend dashboard tests bench tools >/dev/null
	$(BIN)/python -m tests.lanes $(PYTEST_ARGS)

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "groupscope needs Python >= 3.11 (found $$($(PYTHON) --version))"; exit 1; }
	@command -v java >/dev/null || { echo "groupscope needs Java 17 (java not on PATH)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# the wheel a server installs (docs/production.md#install-it-as-a-service): the Kafka reader and
# the offsets writer compiled into it (setup.py), so a Java runtime suffices where it runs
wheel: setup jars
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation --wheel-dir dist .

# Kafka's jars by Maven coordinates into the user's cache (once; offline afterwards), and
# Kafka's and Spark's class-data archives for faster starts (once per Java and jars).
jars: setup
	@$(BIN)/python -m backend.stack.prepare

lint: setup
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# Tests that need no broker, Spark, browser or stack; their markers come from their fixtures
# (tests/markers.py), and GROUPSCOPE_UNIT_ONLY=1 makes the run fail if one starts java/Chromium.
unit: setup
	GROUPSCOPE_UNIT_ONLY=1 $(BIN)/pytest -m "not broker and not spark and not browser and not stack" $(PYTEST_ARGS)

# twenty broker kills under a three-node `up`, an exporter and a watched page: no groupscope
# process may die (tests/system/test_broker_faults.py runs one in `make test`)
soak-brokers: setup jars
	GROUPSCOPE_FAULT_CYCLES=20 $(BIN)/pytest -q tests/system/test_broker_faults.py $(PYTEST_ARGS)

# the Groups page left open for thirty minutes while groups come and go: its JS heap and the
# server's memory must stay flat (tests/dashboard/test_overview_always_on.py runs three)
soak-page: setup jars
	GROUPSCOPE_ALWAYS_ON_S=1800 $(BIN)/pytest -q tests/dashboard/test_overview_always_on.py $(PYTEST_ARGS)

# the README's pictures in assets/screenshots/, from a real `groupscope up --brokers 3` on free
# ports in a temporary directory, in headless Chromium (tools/screenshots.py; several minutes;
# SCREENSHOTS_ARGS=--keep keeps the stack's logs). The room's three come from the room tests.
screenshots: setup jars
	$(BIN)/python tools/screenshots.py $(SCREENSHOTS_ARGS)

clean:
	rm -rf .groupscope test-artifacts .pytest_cache
