# rtrace: every target installs what it needs into .venv (and .venv-e2e-* for the real-client tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
#: How rtrace is installed editable (see $(RUNTIME)).
EDITABLE := --config-settings editable_mode=compat

.PHONY: demo test preflight docs lint unit dist e2e-envs e2e-locks browser bench bench-scale clean fuzz harden fidelity

RUNTIME := $(VENV)/.runtime
# What mypyc compiles (rtrace/_compiled.py, setup.py): an edit of one rebuilds the install.
# Read by make itself (no shell at parse time): the quoted "rtrace.…" words of the file, as paths.
comma := ,
COMPILED_SOURCES := $(patsubst %,%.py,$(subst .,/,$(subst ",,$(subst $(comma),,$(filter "rtrace.%,$(file <rtrace/_compiled.py))))))

# The tool alone (what `make demo` needs): rtrace editable with its runtime dependencies, its fold not compiled
# (RTRACE_MYPYC=0: mypyc takes a minute, the demo a second); the C scanner is built. Editable as a path in a `.pth`
# file (`editable_mode=compat`), not setuptools' import hook: the hook cost every command 8-10 ms of its start-up
# (site 12.6-14.1 ms against 1.9-2.6 ms), which a wheel install does not pay either.
$(RUNTIME): pyproject.toml setup.py rtrace/core/_scan.c rtrace/_compiled.py $(COMPILED_SOURCES)
	@$(NEED_PYTHON) || exit 1
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	RTRACE_MYPYC=0 $(BIN)/python -m pip install -q -e . $(EDITABLE)
	touch $(RUNTIME)

# The test toolchain on top (what `make test` needs), and rtrace rebuilt with its fold compiled (setup.py): the suite,
# the benchmarks and the e2e servers run what an install with a compiler runs.
$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install -q -e '.[test]' $(EDITABLE)
	touch $(STAMP)

# Real-client end-to-end tests (tests/test_e2e_livekit.py): one venv per pinned livekit-agents version, without
# rtrace in it (the client only runs tests/e2e/livekit_scenario.py; the server runs from $(VENV)). Made by uv (from
# $(VENV)): files are hardlinked from its cache, so four venvs take seconds and little more disk than one.
E2E_VERSIONS := 1.8.4 1.8.5 1.8.8 1.8.9
E2E_STAMPS := $(foreach v,$(E2E_VERSIONS),.venv-e2e-$(v)/.installed)

.venv-e2e-%/.installed: | $(STAMP)
	rm -rf .venv-e2e-$*
	$(BIN)/uv venv -q --python $(PYTHON) .venv-e2e-$*
	$(BIN)/uv pip install -q --compile-bytecode --python .venv-e2e-$*/bin/python \
		'livekit-agents==$*' 'livekit-plugins-openai==$*'
	touch $@

# The other real clients of issues 14 and 24 (tests/test_e2e_*.py; voicelive: azure-ai-voicelive 1.3.1), each from a
# full lock of its own in tests/e2e/requirements/
# (NAME.in holds the pin, NAME.txt what `make e2e-locks` compiled from it; the venv is remade when the lock changes).
# uv's default pre-release rule lets only the explicitly pinned livekit-agents 2.0.0b1 be a pre-release.
E2E_LOCKED := openai-agents pipecat openai livekit-2.0.0b1 voicelive
E2E_LOCKED_STAMPS := $(foreach c,$(E2E_LOCKED),.venv-e2e-$(c)/.installed)

$(E2E_LOCKED_STAMPS): .venv-e2e-%/.installed: tests/e2e/requirements/%.txt | $(STAMP)
	rm -rf .venv-e2e-$*
	$(BIN)/uv venv -q --python $(PYTHON) .venv-e2e-$*
	$(BIN)/uv pip sync -q --compile-bytecode --python .venv-e2e-$*/bin/python $<
	touch $@

# Recompile the locks from their pins for Python 3.11, this machine's python3 (not part of `make test`; commit them).
e2e-locks: $(STAMP)
	for c in $(E2E_LOCKED); do \
		$(BIN)/uv pip compile -q --python-version 3.11 --no-header tests/e2e/requirements/$$c.in \
			-o tests/e2e/requirements/$$c.txt || exit 1; \
	done

# The Node clients (agents-js 1.9.0, @openai/agents-realtime 0.20.0, the openai SDK 7.59.0 with ws) from
# tests/e2e/node/package-lock.json, into
# tests/e2e/node/node_modules (where the drivers next to it resolve their imports). Node 20 or later.
NODE_E2E := tests/e2e/node
NODE_STAMP := $(NODE_E2E)/node_modules/.installed

$(NODE_STAMP): $(NODE_E2E)/package.json $(NODE_E2E)/package-lock.json
	@$(NEED_NODE) || exit 1
	cd $(NODE_E2E) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

e2e-envs: $(E2E_STAMPS) $(E2E_LOCKED_STAMPS) $(NODE_STAMP)

demo: $(RUNTIME)
	-$(BIN)/rtrace analyze sample_traces/real/tool-output-race.livekit-1.8.8.jsonl
	@echo
	@echo "(exit 1 above means: findings at error severity, as expected for livekit-agents 1.8.8)"

lint: $(STAMP)
	$(BIN)/ruff check rtrace tests bench docs/hooks.py
	$(BIN)/mypy

# The documentation site (mkdocs.yml): docs/ with the command reference and the rule pages generated from the code
# (docs/hooks.py), into build/site; --strict fails on a broken link or anchor and on a page left out of the nav.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir build/site
	@echo "docs: build/site/index.html"

# Two workers: most of the suite's time is real clients and servers waiting on each other, not CPU.
unit: $(STAMP) e2e-envs
	$(BIN)/python -m pytest -n 2

# Headless Chromium for the HTML report tests (tests/test_report_html.py, marker `browser`), from Debian.
browser:
	@$(NEED_CHROMIUM) || exit 1
	command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# The package as users get it (issue 17): build the sdist and the wheel, check their metadata, install the wheel into a
# clean venv and run the command from there (version, `python -m rtrace`, an analysis of a bundled sample); then the
# sdist on a machine without a C compiler (`CC` names none): it installs pure, and gives the compiled wheel's report
# of every sample.
DIST := build/dist
dist: $(STAMP)
	rm -rf $(DIST) build/venv-wheel build/venv-sdist
	$(BIN)/uv build -q --sdist --wheel --out-dir $(DIST)
	$(BIN)/twine check --strict $(DIST)/*
	$(BIN)/uv venv -q --python $(PYTHON) build/venv-wheel
	$(BIN)/uv pip install -q --python build/venv-wheel/bin/python $(DIST)/*.whl
	cd build && venv-wheel/bin/rtrace --version && venv-wheel/bin/python -m rtrace -V
	cd build && venv-wheel/bin/python -c "import rtrace.core._scan" || { echo "dist: the wheel has no C scanner" >&2; exit 1; }
	cd build && venv-wheel/bin/rtrace analyze ../sample_traces/real/tool-output-race.livekit-1.8.9.jsonl
	cd build && venv-wheel/bin/rtrace analyze -f json ../sample_traces/real/tool-output-race.livekit-1.8.8.jsonl >/dev/null; \
		test $$? -eq 1 || { echo "dist: the installed wheel did not find the 1.8.8 race (exit 1)" >&2; exit 1; }
	cd build && venv-wheel/bin/python -c "import rtrace._compiled as c, sys; sys.exit(not c.compiled())" || \
		{ echo "dist: the wheel's fold is not compiled" >&2; exit 1; }
	$(BIN)/uv venv -q --python $(PYTHON) build/venv-sdist
	CC=rtrace-no-compiler $(BIN)/uv pip install -q --no-cache --python build/venv-sdist/bin/python $(DIST)/*.tar.gz
	cd build && venv-sdist/bin/python -c "import rtrace._compiled as c, sys; sys.exit(c.compiled())" || \
		{ echo "dist: the sdist built without a compiler is compiled" >&2; exit 1; }
	cd build && venv-wheel/bin/rtrace analyze -f json -j 1 ../sample_traces >wheel.json || test $$? -eq 1
	cd build && venv-sdist/bin/rtrace analyze -f json -j 1 ../sample_traces >sdist.json || test $$? -eq 1
	cmp -s build/wheel.json build/sdist.json || { echo "dist: the pure install's reports differ from the wheel's" >&2; exit 1; }

# The fake endpoint against recordings of the real server (issue 25, bench/fidelity.py): each recorded session's
# client events fed to serve, its answers compared with the recording; prints every difference that stays with its
# reason (exit 1 on one the table does not explain) and the analyzer's error findings on them (none allowed). The
# recordings are read in place from ../shared/realapi beside the clone (REALAPI=... to point elsewhere); without
# them it says it skipped.
REALAPI ?=
fidelity: $(STAMP)
	$(BIN)/python -m bench.fidelity $(REALAPI)


# What `make test` needs from the machine, checked before anything is installed: each check prints what is missing
# and how to get it, and fails; `preflight` runs them all, so one run names every missing piece. (CI runs as root
# with npm and Node 20: every check passes there and the run is complete.)
NEED_PYTHON = $(PYTHON) -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' 2>/dev/null || { \
	echo "make: Python 3.10 or later with its venv module is needed ($(PYTHON) is not; PYTHON=python3.X make ...," \
		"or apt-get install python3-venv)" >&2; false; }
NEED_NODE = if ! { command -v npm && command -v node; } >/dev/null 2>&1; then \
	echo "make: npm and Node 20 or later are needed for the Node client tests (tests/e2e/node: npm ci);" \
		"none found on PATH: apt-get install nodejs npm, or Node 20+ from nodejs.org's packages" >&2; false; \
	elif ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then \
	echo "make: Node 20 or later is needed for the Node client tests; this node is $$(node --version)" >&2; false; fi
NEED_CHROMIUM = command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ test "$$(id -u)" = 0 && command -v apt-get >/dev/null 2>&1; } || { \
	echo "make: Chromium is needed for the HTML report tests (tests/test_report_html.py). As root, make installs" \
		"Debian's package itself; here (not root, or no apt-get) install it first: sudo apt-get install chromium" >&2; \
	false; }

preflight:
	@echo "make test installs, the first time (later runs reuse it all): .venv with the test tools (560 MB), eight real-client"
	@echo "environments .venv-e2e-* (1.25 GB, hardlinked from uv's cache, 0.5 GB in ~/.cache/uv), 230 npm packages in"
	@echo "tests/e2e/node/node_modules (400 MB) and, if missing, Debian's chromium (360 MB, as root): 2.2 GB in this folder."
	@echo "It then runs lint, types, the package check, the docs site and the suite: about 12 minutes on 2 cores."
	@ok=0; \
	$(NEED_PYTHON) || ok=1; \
	$(NEED_NODE) || ok=1; \
	$(NEED_CHROMIUM) || ok=1; \
	exit $$ok

test: preflight $(STAMP) lint docs dist browser fidelity unit

# Long local fuzz run of the hardening properties (minutes; not part of `make test`); prints the example counts.
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=long $(BIN)/python -m pytest tests/test_hardening.py tests/test_transform_redact.py \
		-p no:cacheprovider --hypothesis-show-statistics -q

# Hardening tally of issue 16 (about 4 minutes; not part of `make test`): every class of attack tried many times
# (crafted URLs and traces, a wrong-type fuzz of every field, planted secrets, hostile names, special files, signals,
# floods, parallel clients); prints cases tried / held / failed per class, writes bench/out/harden.json; exit 1 on
# any failure. `make harden HARDEN_ARGS='--only 4,7'` or `--quick`.
harden: $(STAMP)
	$(BIN)/python -m bench.harden $(HARDEN_ARGS)
	$(BIN)/python -m bench.harden_hunt $(HARDEN_ARGS)

# Benchmarks of issues 7 and 15 (minutes; not part of `make test`): generates bench/data/ (cached), prints the table
# (with DuckDB's read_json as the reference of a columnar reader and msgspec's typed decoder as the next floor,
# installed into .venv if missing).
# Also the fake server's ack-latency accuracy and the recorder's added latency against mitmdump (reverse mode),
# mitmproxy from its own venv so it never meets the project's dependencies; and of issue 15, the HTML report of
# the 1M-event session in headless Chromium and the Dask engine's cost per trace (2,000 small traces).
bench: $(STAMP) .venv-mitm/.installed browser
	command -v jq >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq)
	$(BIN)/python -c "import duckdb" 2>/dev/null || $(BIN)/python -m pip install -q 'duckdb>=1.0'  # issue 15's reference
	$(BIN)/python -c "import msgspec" 2>/dev/null || $(BIN)/python -m pip install -q 'msgspec>=0.18'  # issue 27's typed limit
	$(BIN)/python -m bench.generate
	$(BIN)/python -m bench.run
	$(BIN)/python bench/bench_serve.py
	$(BIN)/python bench/bench_record.py --mitmdump .venv-mitm/bin/mitmdump
	$(BIN)/python -m bench.bench_html
	$(BIN)/python -m bench.bench_dask
	$(MAKE) e2e-envs && $(BIN)/python bench/bench_hunt.py  # real clients, 5 minutes of search each
	$(BIN)/python bench/bench_minimize.py
	$(BIN)/python bench/bench_zstd.py

# Scaling suite of issue 15 (minutes; not part of `make test`): every session shape at 1x, 4x and 16x (traces cached
# under bench/data/scale/), time against the orjson floor, peak RSS and growth exponent; exit 1 unless every shape
# is linear. Options: `make bench-scale SCALE_ARGS='--shapes html-report --timeout 60'`.
bench-scale: $(STAMP)
	$(BIN)/python -m bench.run_scale $(SCALE_ARGS)

.venv-mitm/.installed: | $(STAMP)
	rm -rf .venv-mitm
	$(BIN)/uv venv -q --python $(PYTHON) .venv-mitm
	$(BIN)/uv pip install -q --python .venv-mitm/bin/python mitmproxy
	touch $@

clean:
	rm -rf $(VENV) .venv-e2e-* .venv-mitm $(NODE_E2E)/node_modules .pytest_cache .mypy_cache .ruff_cache
