# Shared by scripts/test and scripts/run: installs missing tools and prints steps.
# shellcheck shell=bash

# A section heading, with the seconds since the script started so slow steps show in CI logs.
step() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS"; }

have() { command -v "$1" >/dev/null 2>&1; }

# Runs apt-get as root directly, or through sudo when there is one.
apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

pg_bin_dir() {
  if have initdb && have pg_ctl && have postgres; then
    dirname "$(readlink -f "$(command -v initdb)")"
    return
  fi
  find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1
}

pip_install() {
  python3 -m pip install --quiet --disable-pip-version-check "$@"
}

# Everything the tests and the local run need, installed only when missing.
ensure_tools() {
  have cargo || { echo "cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
  have python3 || { echo "python3 not found: install Python 3" >&2; exit 1; }
  local bindir
  bindir=$(pg_bin_dir)
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    step "installing PostgreSQL server binaries"
    apt_install postgresql
    bindir=$(pg_bin_dir)
  fi
  # pg_stat_statements (statement counts in the tests) ships in the server package's contrib.
  if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
    echo "PostgreSQL server binaries still missing after install" >&2
    exit 1
  fi
  export PATH="$bindir:$PATH"
  if ! have pgbouncer && [ ! -x /usr/sbin/pgbouncer ]; then
    step "installing PgBouncer (tests/it/pooler.rs runs through it)"
    apt_install pgbouncer
  fi
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    # initdb refuses to run as root: the harness runs the server as this user.
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  fi
  # Console scripts installed by pip land here; it may not be on PATH yet.
  PATH="$(python3 -c "import sysconfig; print(sysconfig.get_path('scripts'))"):$PATH"
  export PATH
  if ! have cargo-lambda; then
    step "installing cargo-lambda"
    pip_install cargo-lambda
  fi
  if ! have cfn-lint; then
    step "installing cfn-lint"
    pip_install cfn-lint
  fi
  if ! have moto_server; then
    step "installing moto's server (local AWS endpoint for tests)"
    pip_install "moto[server]"
  fi
  rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt 2>/dev/null || true
}
