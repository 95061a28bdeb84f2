#!/usr/bin/env bash
# Run .ci/run the way CI does, on a brand-new Debian 12 machine: a debootstrap'd
# bookworm root holding only what the CI machine has (python3, venv, pip, gcc, make,
# git, ca-certificates), a fresh `git clone` of a repository inside it, then
# `CI=true bash .ci/run` as root. This exercises what a developer machine hides: the
# Makefile's apt install of chromium/nodejs/bubblewrap and no Playwright browser cache.
#
#   usage (as root, on Debian or with debootstrap installed):
#     .ci/fresh-machine.sh [REPO] [LOG]
#   REPO defaults to this checkout (its committed HEAD is cloned), LOG to ./fresh-ci.log.
#   FRESHROOT (default /work/freshroot) is where the root lives (~2 GB once CI has
#   installed its packages); debootstrap takes ~2 min and its result is kept as
#   FRESHROOT.pristine.tar: KEEP_ROOT=1 restores the root from that tar instead of
#   bootstrapping again (still no chromium, node, bwrap or caches). MIRROR picks the
#   Debian mirror. The repository is cloned into /root/repo, as root's home is where
#   a CI job as root may well put it (a 0700 parent). A run took ~20 min here.
#
# The root is entered as a chroot would be, but from a private mount namespace
# (unshare --mount) whose root is pivot_root'ed to the new tree: the kernel refuses to
# create a user namespace from a chrooted process (create_user_ns: EPERM when
# current_chrooted(); `chroot ROOT unshare -U -r true` fails with "Operation not
# permitted"), and bubblewrap's --unshare-user (agent containment) needs one. A real CI
# machine is not chrooted, so this is the faithful setup. /proc, /sys and /dev are
# bind-mounted and /dev/shm is a fresh tmpfs (Chromium needs it); all mounts live in
# that namespace and vanish with it, so nothing stays mounted on the host.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
REPO="$(cd "${1:-$here}" && pwd)"
LOG="$(realpath -m "${2:-$PWD/fresh-ci.log}")"
ROOT="${FRESHROOT:-/work/freshroot}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
PRISTINE="$ROOT.pristine.tar"
PKGS=python3,python3-venv,python3-pip,make,git,gcc,ca-certificates

[ "$(id -u)" = 0 ] || { echo "run as root (debootstrap, mounts, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y debootstrap

if [ "${KEEP_ROOT:-0}" = 1 ] && [ -f "$PRISTINE" ]; then
    # Back to the state right after debootstrap: no chromium, no node, no caches.
    rm -rf "$ROOT"; mkdir -p "$ROOT"; tar -C "$ROOT" -xpf "$PRISTINE"
else
    rm -rf "$ROOT"
    debootstrap --variant=minbase --include="$PKGS" bookworm "$ROOT" "$MIRROR"
    # Name resolution for apt and PyPI inside the root.
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
    tar -C "$ROOT" -cpf "$PRISTINE" .
fi

# The committed HEAD of REPO (a worktree too), as a bare repository CI clones from.
branch="$(git -C "$REPO" rev-parse --abbrev-ref HEAD)"
git clone -q --bare --branch "$branch" "$REPO" "$ROOT/src.git"

# The sources a Debian 12 install has (debootstrap writes only "bookworm main"), so
# apt gets the current Chromium from bookworm-security as a real CI machine would.
cat >"$ROOT/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES

# This machine reaches PyPI through a TLS-intercepting egress proxy: its extra CAs go
# into the root's trust store, and SSL_CERT_FILE points uv (which otherwise trusts only
# its bundled roots) at that store, as on the host. A no-op where there are none.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
    chroot "$ROOT" update-ca-certificates >/dev/null
fi

# Inside the new namespace: mounts, pivot_root, then the CI steps as root.
enter='
    R=$1; shift
    mount --rbind "$R" "$R"
    for d in proc sys dev; do mount --rbind "/$d" "$R/$d"; done
    mount -t tmpfs -o mode=1777,size=2g shm "$R/dev/shm"
    cd "$R" && mkdir -p .oldroot && pivot_root . .oldroot && umount -l /.oldroot && rmdir /.oldroot
    exec chroot . "$@"'
steps='
    git clone -q /src.git /root/repo && cd /root/repo
    git log --oneline -1
    python3 --version
    ls -d /root/.cache/ms-playwright 2>&1 || true
    for c in chromium node bwrap; do command -v $c || echo "$c: not installed"; done
    CI=true bash .ci/run'

start=$(date +%s)
set +e
nice -n 10 unshare --mount --propagation private bash -euc "$enter" enter "$ROOT" \
    /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 TERM=dumb SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt bash -euo pipefail -c "$steps" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e
echo "fresh-machine: .ci/run exited $rc after $(( $(date +%s) - start )) s" | tee -a "$LOG"
exit "$rc"
