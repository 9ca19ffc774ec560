# Thin wrappers over `grader` and pytest; every target is one command you could type yourself.
PYTHON ?= python3
PIP = $(PYTHON) -m pip
# The CPU wheel of torch (a multi-GB CUDA build would come with a bare `torch`); on a GPU box with
# torch already installed nothing is replaced.
TORCH_PIN ?= torch==2.13.0
TRITON_PIN ?= triton==3.6.0
PYTEST = $(PYTHON) -m pytest -p grader.plugin

.PHONY: install system-packages test test-suites test-harness stubs handout grade-examples examples bench calibrate clean

install: system-packages
	$(PYTHON) -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH_PIN)"
	$(PYTHON) -c "import triton" 2>/dev/null || $(PIP) install -q "$(TRITON_PIN)"
	$(PIP) install -q -e ".[dev,course]"   # course: copydetect, for `grader similarity` and its tests
	@# `make handout` installs the handout offline with this environment's setuptools (no build
	@# isolation): a fresh venv's bundled setuptools 65 cannot build an editable wheel.
	$(PYTHON) -c "import setuptools.command.bdist_wheel" 2>/dev/null || $(PYTHON) -c "import wheel" 2>/dev/null \
		|| $(PIP) install -q "setuptools>=70.1"
	$(PYTHON) examples/make_examples.py
	@$(PYTHON) -c "import torch, triton, numpy; print('installed: torch', torch.__version__, '| triton', triton.__version__, '| numpy', numpy.__version__, '| CUDA', torch.cuda.is_available())"

# Chromium (report screenshots in the tests) and bubblewrap (the grading sandbox); optional, best effort.
system-packages:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! (command -v chromium >/dev/null && command -v bwrap >/dev/null); then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium bubblewrap >/dev/null) \
		|| echo "note: could not install chromium/bubblewrap; their tests will be skipped"; fi

# The staff self-check: stubs up to date, both suites against the solutions, the harness's own tests.
test: test-harness test-suites

test-suites:
	$(PYTEST) tests_public tests_hidden --impl solutions -q

test-harness:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m grader handout stubs --check
	$(PYTEST) tests -q

stubs:
	$(PYTHON) -m grader handout stubs

handout:
	$(PYTHON) -m grader handout build --out dist/handout

examples:
	$(PYTHON) examples/make_examples.py

grade-examples: examples
	$(PYTHON) -m grader grade examples/submissions --out reports

bench:
	$(PYTHON) -m grader bench kernels --impl solutions

calibrate:
	$(PYTHON) -m grader calibrate

clean:
	rm -rf dist reports .pytest_cache
