# Two commands on a fresh machine: `make demo` and `make test`.
# Both bootstrap a pinned uv into .tools/ and sync the locked dev environment
# into .venv/ (first-party providers and the example plugin included). --inexact:
# a plugin the user installed into .venv (README) is kept, not removed as extraneous.
PYTHON ?= python3
UV_VERSION := 0.13.9
UV := .tools/bin/uv
VENV := .venv
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/$(VENV)

.PHONY: setup system-deps examples demo test typecheck lint bench dist clean

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.synced: $(UV) uv.lock pyproject.toml plugins_example/pyproject.toml providers/roundup/pyproject.toml providers/ihatemoney/pyproject.toml
	$(UV) sync --frozen --inexact --all-packages --quiet
	touch $@

setup: $(VENV)/.synced

# The browser tests drive the distribution's Chromium (never a download): install it
# when missing and we are root on a Debian-like system, else say how.
demo: setup
	$(VENV)/bin/effectbench run --out runs/demo --force

# System packages the tests drive: the distribution's Chromium (browser substrate and
# report; its headless shell is what runs episodes: a third of the CPU,
# docs/performance.md), Node.js (a reference agent), npm (the Puppeteer example's
# packages), bubblewrap (agent containment), and the display pool's Xvfb, D-Bus,
# AT-SPI registry, gdbus (waits for it) and X utilities, TigerVNC's Xvnc and vncpasswd
# (remote_display), tesseract's English model (its OCR runs in-process through the
# tesserocr wheel) and Debian's python3 with GTK 3 for MockMed's desktop client
# (docs/substrates.md).
# Installed when missing and root; otherwise the command to run is printed and make stops.
SYSTEM_DEPS := chromium:chromium chromium-headless-shell:chromium-headless-shell node:nodejs npm:npm bwrap:bubblewrap unshare:util-linux \
	Xvfb:xvfb dbus-daemon:dbus dbus-send:dbus /usr/libexec/at-spi2-registryd:at-spi2-core gdbus:libglib2.0-bin xprop:x11-utils xdpyinfo:x11-utils \
	Xvnc:tigervnc-standalone-server vncpasswd:tigervnc-tools xmessage:x11-utils
TESSDATA := /usr/share/tesseract-ocr/5/tessdata/eng.traineddata
system-deps:
	@missing=""; for pair in $(SYSTEM_DEPS); do \
	    command -v "$${pair%%:*}" >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	/usr/bin/python3 -c "import gi; gi.require_version('Gtk', '3.0')" >/dev/null 2>&1 \
	    || missing="$$missing python3-gi gir1.2-gtk-3.0"; \
	[ -f $(TESSDATA) ] || missing="$$missing tesseract-ocr-eng"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	else echo "make test needs:$$missing (as root: apt-get install$$missing)" >&2; exit 1; fi

# What the examples under examples/ need to run (tests/repo/test_examples.py runs them): the
# Puppeteer agent's locked npm packages (puppeteer-core never downloads a browser) and
# the Playwright agent's own venv, made by its Makefile.
PUPPETEER := examples/puppeteer-agent
examples: $(PUPPETEER)/node_modules/.installed examples/playwright-agent/.venv/.installed

$(PUPPETEER)/node_modules/.installed: $(PUPPETEER)/package.json $(PUPPETEER)/package-lock.json | system-deps
	cd $(PUPPETEER) && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
	touch $@

examples/playwright-agent/.venv/.installed: examples/playwright-agent/requirements.txt
	$(MAKE) -C examples/playwright-agent PYTHON=$(PYTHON)

test: setup system-deps examples
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup

typecheck: setup
	$(VENV)/bin/mypy

lint: setup
	$(VENV)/bin/ruff check effectbench providers plugins_example tests bench
	$(VENV)/bin/ruff format --check effectbench providers plugins_example tests bench

bench: setup
	for b in bench/[!_]*.py; do echo "== $$b"; $(VENV)/bin/python $$b || exit 1; done

# Wheels and sdists of effectbench (MockMed inside) and of the example plugin, into
# $(DIST)/: install them with pip anywhere (the packages are not on PyPI).
DIST ?= dist
dist: $(UV)
	$(UV) build --all-packages --out-dir $(DIST)

clean:
	rm -rf .tools $(VENV) runs dist
