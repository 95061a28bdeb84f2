# Two commands on a fresh machine: `make demo` and `make test`.
# Both bootstrap a pinned uv into .tools/ and sync the locked dev environment
# into .venv/ (first-party providers and the example plugin included).
PYTHON ?= python3
UV_VERSION := 0.13.9
UV := .tools/bin/uv
VENV := .venv
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)

.PHONY: setup system-deps demo test typecheck lint bench clean

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.synced: $(UV) uv.lock pyproject.toml plugins_example/pyproject.toml
	$(UV) sync --frozen --all-packages --quiet
	touch $@

setup: $(VENV)/.synced

demo: setup
	$(VENV)/bin/effectbench run --out runs/demo --force

# The agent-protocol tests run Node.js and bubblewrap: installed here when missing and root.
system-deps:
	@missing=""; command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then \
		apt-get update && apt-get install -y --no-install-recommends $$missing; \
	elif [ -n "$$missing" ]; then echo "make test needs:$$missing (apt-get install$$missing)"; fi

test: setup system-deps
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup

typecheck: setup
	$(VENV)/bin/mypy

lint: setup
	$(VENV)/bin/ruff check effectbench providers plugins_example tests bench

bench: setup
	for b in bench/[!_]*.py; do echo "== $$b"; $(VENV)/bin/python $$b || exit 1; done

clean:
	rm -rf .tools $(VENV) runs
