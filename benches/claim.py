#!/usr/bin/env python3
"""The claim benchmark: the ledger's statements against simpler tables, as a regression gate.

Starts a throwaway PostgreSQL cluster, applies migrations/*.sql, and runs pgbench (-M extended:
every statement unnamed, parsed and planned at each call, as the handler sends it; 1 KB payload)
over these paths, new and duplicate deliveries, at 1, 4 and 16 clients, in alternating rounds
(each round runs every path once, in a rotating order):

  bare         INSERT … ON CONFLICT DO NOTHING into a table of the key and the payload
  seeds        a two-statement handler on its own narrow table: INSERT … ON CONFLICT DO NOTHING
               RETURNING (status processing), then UPDATE to done
  fair         the same two statements on a table that also indexes its processing rows (so a
               reclaim could find them), which makes its UPDATE non-HOT like the ledger's finish
  store_only   the store-only claim: the row is stored done in the claim
  claim_finish the claim, then the fenced finish
  guarded_store_only, guarded_claim_finish
               the same two for a source with the replay guard (each new delivery a body of
               its own; a duplicate the same id and body)
  resent_body  duplicates only: a guarded body re-sent under a new id, answered from the row
               that holds it

With `--previous COMMIT`, that commit's migrations go into a database of their own in the same
cluster, and its store-only claim and claim + finish run as two more paths (prev_store_only,
prev_claim_finish), so a change to the ledger is measured against the code it replaces in the
same rounds.

The statements are the .sql files in benches/claim/. Ratios between paths measured in the same
rounds move much less with the machine's load than rates do, so the gate is on ratios: a ratio
more than 10 % below benches/claim/baseline.json is measured again, as many rounds more, and the
run fails when it is still that far below over all its rounds. `--record` writes the measured
ratios there instead (`--lower`: only where lower than committed). BENCHMARKS.md describes the
method and holds the current table.

Usage: python3 benches/claim.py [--secs 3] [--rounds 5] [--clients 1,4,16]
                                [--record [--lower] | --no-gate [--protocol prepared]]
                                [--previous COMMIT] [--out target/bench] [--setup extra.sql]
                                [--path name=table:claim.sql[,finish.sql]]
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SQL = os.path.join(HERE, "claim")
BASELINE = os.path.join(SQL, "baseline.json")
# pgbench -M: unnamed statements, as the handler sends them (it works through transaction
# poolers), for the gated ratios; `--protocol prepared` sets named prepared statements for one
# run, to see what the statements cost without their parsing.
PROTOCOL = "extended"

# The ledger's statements bind $1, $2, ...; the scripts bind these pgbench variables in their
# place (benches/claim/*.sql use the variables directly).
CLAIM = ("src/ledger/sql/claim.sql", ["source", "id", "owner", "lease_secs", "payload", "sha",
                                      "headers", "event_type", "id_origin", "store_only",
                                      "long_key_retention", "replay_guard", "max_attempts"])
FINISH = ("src/ledger/sql/finish.sql", ["source", "id", "attempt", "owner", "='done'",
                                       "=NULL", "=NULL", "=NULL", "=NULL"])

# Redelivered ids: DUP_BASE + 1 ..= DUP_BASE + DUP_COUNT, 19 digits like the random new ones.
DUP_BASE = 1_000_000_000_000_000_000
DUP_COUNT = 10_000

# The claim for a source with the replay guard: its own source name, and the body's hash bound
# as the SHA-256 of the pgbench variable `body` (an integer), so that each new delivery carries
# a body of its own (an entry starting with "=" is an SQL expression, not a variable). Computing
# it costs the server well under a microsecond.
GUARDED_CLAIM = ("src/ledger/sql/claim.sql",
                 ["guarded_source", "id", "owner", "lease_secs", "payload",
                  "=sha256(int8send(:body))", "headers", "event_type", "id_origin", "store_only",
                  "long_key_retention", "replay_guard", "max_attempts"])
GUARDED_FINISH = ("src/ledger/sql/finish.sql", ["guarded_source", "id", "attempt", "owner",
                                               "='done'", "=NULL", "=NULL", "=NULL", "=NULL"])

KINDS = ("new", "duplicate")

# name, label, the table it writes, its claim statements, the statements that finish a new
# delivery (a duplicate is not finished), pgbench variables of its own, and the kinds it runs.
PATHS = [
    ("bare", "bare insert", "bench_bare", ["benches/claim/bare.sql"], [], {}, KINDS),
    ("seeds", "seeds' handler", "bench_seeds", ["benches/claim/seeds.sql"],
     ["benches/claim/seeds-finish.sql"], {}, KINDS),
    ("fair", "fair handler", "bench_fair", ["benches/claim/seeds.sql"],
     ["benches/claim/seeds-finish.sql"], {}, KINDS),
    ("store_only", "store-only claim", "hookclaim_deliveries", [CLAIM], [], {"store_only": 1},
     KINDS),
    ("claim_finish", "claim + finish", "hookclaim_deliveries", [CLAIM], [FINISH],
     {"store_only": 0}, KINDS),
    ("guarded_store_only", "guarded store-only", "hookclaim_deliveries", [GUARDED_CLAIM], [],
     {"store_only": 1, "replay_guard": 1, "body": ":id"}, KINDS),
    ("guarded_claim_finish", "guarded claim + finish", "hookclaim_deliveries", [GUARDED_CLAIM],
     [GUARDED_FINISH], {"store_only": 0, "replay_guard": 1, "body": ":id"}, KINDS),
    # A new id carrying the body of one of the finished guarded rows.
    ("resent_body", "body re-sent, new id", "hookclaim_deliveries", [GUARDED_CLAIM], [],
     {"store_only": 1, "replay_guard": 1, "id": "random(1, 9223372036854775806)",
      "body": f"{DUP_BASE} + random(1, {DUP_COUNT})"}, ("duplicate",)),
]

# The ratios the gate holds: (path, baseline path, kind). A ratio the baseline does not hold yet
# is reported and recorded by --record, not gated.
GATED = [
    ("store_only", "seeds", "new"),
    ("claim_finish", "seeds", "new"),
    ("claim_finish", "fair", "new"),
    ("store_only", "bare", "duplicate"),
    ("guarded_store_only", "store_only", "new"),
    ("guarded_claim_finish", "claim_finish", "new"),
    ("guarded_store_only", "store_only", "duplicate"),
    ("resent_body", "store_only", "duplicate"),
]

BODY_BYTES = 1024
TOLERANCE = 0.10
WAL_DELIVERIES = 2000


def body():
    """A 1 KB JSON body, as a GitHub delivery of that size."""
    head = '{"action":"completed","order_id":"1","repository":{"full_name":"hookclaim/bench"},"padding":"'
    tail = '"}'
    return (head + "x" * (BODY_BYTES - len(head) - len(tail)) + tail).encode()


def variables():
    """What every script binds, as pgbench -D and psql -v values."""
    payload = body()
    sha = hashlib.sha256(payload).hexdigest()
    headers = {
        "content-type": "application/json",
        "user-agent": "GitHub-Hookshot/bench",
        "x-github-delivery": "1",
        "x-github-event": "push",
        "x-hub-signature-256": "sha256=" + sha,
    }
    return {
        "source": "github",
        "payload": "\\x" + payload.hex(),
        "sha": "\\x" + sha,
        "headers": json.dumps(headers, separators=(",", ":"), sort_keys=True),
        "event_type": "push",
        "id_origin": "header",
        "owner": "%032x" % 0x5EED,
        # The invocation that stored the redelivered rows (setup.sql).
        "first_owner": "%032x" % 0xF1257,
        "lease_secs": "90.5",
        "guarded_source": "github-guarded",
        "long_key_retention": "true",
        "replay_guard": "false",
        "max_attempts": "10",
        "attempt": "1",
        "dup_base": str(DUP_BASE),
        "dup_count": str(DUP_COUNT),
    }


class Cluster:
    """A throwaway PostgreSQL cluster with the test harness's settings, run as `postgres` when
    this process is root (initdb refuses root)."""

    def __init__(self, bindir):
        self.bindir = bindir
        self.dir = tempfile.mkdtemp(prefix="hookclaim-bench-")
        self.data = os.path.join(self.dir, "data")
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.tool("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")
        conf = ("listen_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
                "max_connections = 100\nfsync = off\nfull_page_writes = off\n"
                "shared_buffers = 128MB\nlog_min_messages = warning\n"
                f"port = {self.port}\n")
        with open(os.path.join(self.data, "postgresql.auto.conf"), "w") as f:
            f.write(conf)
        self.tool("pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "server.log"), "-w",
                  "start")

    def server_cpu(self):
        """CPU seconds of the server's exited processes: pgbench's backends once a run is over
        and the postmaster has reaped them."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            pid = f.readline().strip()
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # cutime and cstime: fields 16 and 17 of stat, 14 and 15 after the name.
        return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")

    def command(self, tool, *args):
        cmd = [os.path.join(self.bindir, tool), *args]
        return ["runuser", "-u", "postgres", "--", *cmd] if self.as_postgres else cmd

    def tool(self, tool, *args):
        subprocess.run(self.command(tool, *args), check=True, stdout=subprocess.DEVNULL)

    def conn_args(self):
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]

    def psql(self, sql=None, file=None, vars=None, db="bench"):
        cmd = [os.path.join(self.bindir, "psql"), *self.conn_args(), "-X", "-q", "-A", "-t",
               "-v", "ON_ERROR_STOP=1", "-d", db]
        for k, v in (vars or {}).items():
            cmd += ["-v", f"{k}={v}"]
        # SQL text goes in on standard input, where psql substitutes :variables as in a file.
        cmd += ["-f", "-" if sql is not None else file]
        out = subprocess.run(cmd, input=sql, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"psql {file or sql[:60]} failed:\n{out.stderr}")
        return out.stdout.strip()

    def stop(self):
        subprocess.run(self.command("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


# The database each path runs in, where not "bench" (--previous adds its paths here).
DATABASE = {}


def source(path):
    """A file of the repository as it is, or, written "COMMIT:path", as it was at COMMIT."""
    commit, sep, at = path.partition(":")
    if not sep:
        return open(os.path.join(ROOT, path)).read()
    return subprocess.run(["git", "-C", ROOT, "show", f"{commit}:{at}"], check=True,
                          capture_output=True, text=True).stdout


def statement(spec):
    """A statement of a path as pgbench runs it: a benchmark script as it is, or a ledger
    statement with its $n parameters bound to pgbench variables (or, for a name starting with
    "=", to the SQL expression after it)."""
    if isinstance(spec, str):
        return source(spec)
    path, names = spec

    def bound(m):
        name = names[int(m.group(1)) - 1]
        return name[1:] if name.startswith("=") else ":" + name

    # Comments go first: a `$n` in one is not a parameter.
    sql = re.sub(r"--[^\n]*", "", source(path)).rstrip().rstrip(";")
    return re.sub(r"\$(\d+)", bound, sql) + "\n;\n"


def previous_paths(commit):
    """The store-only claim and claim + finish of `commit`, as that commit's benchmark bound
    them, run in a database with that commit's migrations."""
    claim = (f"{commit}:src/ledger/sql/claim.sql", CLAIM[1])
    finish = (f"{commit}:{FINISH[0]}", FINISH[1])
    paths = [
        ("prev_store_only", f"store-only claim of {commit}", "hookclaim_deliveries", [claim],
         [], {"store_only": 1}, KINDS),
        ("prev_claim_finish", f"claim + finish of {commit}", "hookclaim_deliveries", [claim],
         [finish], {"store_only": 0}, KINDS),
    ]
    for name, *_ in paths:
        DATABASE[name] = "bench_prev"
    return paths


def scripts(paths, out):
    """One pgbench script per path and kind: the id to use, the claim, and for a new delivery
    the finish. `{table}` in a statement is the path's table, so one script serves several."""
    ids = {
        "new": "\\set id random(1, 9223372036854775806)\n",
        "duplicate": f"\\set id {DUP_BASE} + random(1, {DUP_COUNT})\n",
    }
    written = {}
    for name, _, table, claim, finish, sets, kinds in paths:
        for kind in kinds:
            text = ids[kind] + "".join(f"\\set {k} {v}\n" for k, v in sets.items())
            text += "".join(statement(s) for s in claim)
            if kind == "new":
                text += "".join(statement(s) for s in finish)
            text = text.replace("{table}", table)
            path = os.path.join(out, f"{name}-{kind}.sql")
            with open(path, "w") as f:
                f.write(text)
            written[(name, kind)] = path
    return written


def pgbench(cluster, script, clients, vars, secs=None, transactions=None, db="bench"):
    """Runs `script`; returns (transactions per second, transactions processed, server CPU µs
    per transaction)."""
    cmd = [os.path.join(cluster.bindir, "pgbench"), *cluster.conn_args(), "-n", "-M", PROTOCOL,
           "-c", str(clients), "-j", str(min(clients, 2)), "-f", script]
    cmd += ["-T", str(secs)] if secs else ["-t", str(transactions)]
    for k, v in vars.items():
        cmd += ["-D", f"{k}={v}"]
    cmd.append(db)
    cpu = cluster.server_cpu()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0 or "number of failed transactions: 0" not in out.stdout:
        sys.exit(f"pgbench {script} failed:\n{out.stdout}\n{out.stderr}")
    tps = float(re.search(r"tps = ([0-9.]+)", out.stdout).group(1))
    done = int(re.search(r"actually processed: (\d+)", out.stdout).group(1))
    time.sleep(0.2)  # the postmaster reaps the backends
    return tps, done, (cluster.server_cpu() - cpu) * 1e6 / max(done, 1)


def rows(cluster, table, db="bench"):
    """Rows in `table`, and rows it holds that are not done (every path finishes what it claims;
    the bare table has no status)."""
    status = "0" if table == "bench_bare" else f"count(*) FILTER (WHERE status <> 'done')"
    line = cluster.psql(f"SELECT count(*), {status} FROM {table}", db=db)
    return tuple(map(int, line.split("|")))


def wal_per_delivery(cluster, script, vars, db="bench"):
    """WAL bytes one delivery writes: one client, WAL_DELIVERIES transactions, after a
    checkpoint."""
    cluster.psql("CHECKPOINT")
    before = cluster.psql("SELECT pg_current_wal_insert_lsn()")
    pgbench(cluster, script, 1, vars, transactions=WAL_DELIVERIES, db=db)[0]
    diff = cluster.psql(f"SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '{before}')")
    return float(diff) / WAL_DELIVERIES


def measure(cluster, paths, written, vars, secs, rounds, groups, results):
    """Runs `rounds` rounds of every path for each (clients, kind) in `groups`, adding each
    round's rate and server CPU to `results` (under "kind/clients" and "cpu/kind/clients")."""
    for clients, kind in groups:
        running = [p for p in paths if kind in p[-1]]
        rates = results.setdefault(f"{kind}/{clients}", {n: [] for n, *_ in running})
        cpus = results.setdefault(f"cpu/{kind}/{clients}", {n: [] for n, *_ in running})
        for r in range(rounds):
            order = running[r % len(running):] + running[:r % len(running)]
            for name, _, table, *_ in order:
                db = DATABASE.get(name, "bench")
                before, _ = rows(cluster, table, db)
                tps, done, cpu = pgbench(cluster, written[(name, kind)], clients, vars,
                                         secs=secs, db=db)
                after, unfinished = rows(cluster, table, db)
                want = done if kind == "new" else 0
                if after - before != want or unfinished:
                    sys.exit(f"{name} {kind}: {after - before} rows added for {done} "
                             f"deliveries, {unfinished} not done")
                rates[name].append(tps)
                cpus[name].append(cpu)
        print(f"  {kind:9} c={clients:2}: " + " | ".join(
            f"{name} {statistics.median(r):7.0f}/s" for name, r in rates.items()), flush=True)
    return results


def ratio(results, path, base, kind, clients):
    """The median over rounds of path's rate over base's in the same round."""
    rates = results[f"{kind}/{clients}"]
    return statistics.median(p / b for p, b in zip(rates[path], rates[base]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--secs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--record", action="store_true", help="write the ratios to the baseline")
    ap.add_argument("--lower", action="store_true",
                    help="with --record, keep the lower of each measured and committed ratio")
    ap.add_argument("--no-gate", action="store_true", help="report without comparing (smoke runs)")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench"))
    ap.add_argument("--path", action="append", default=[],
                    help="an extra path beside the others: name=table:claim.sql[,finish.sql] "
                         "(files in benches/claim/, using pgbench variables; {table} is the "
                         "table)")
    ap.add_argument("--setup", action="append", default=[],
                    help="an extra SQL file (in benches/claim/) run after setup.sql")
    ap.add_argument("--protocol", choices=["prepared", "extended"], default="extended",
                    help="pgbench -M: extended (the default) sends every statement unnamed, "
                         "parsed and planned at each call, as the handler does; prepared names "
                         "and prepares each once per connection, never gated")
    ap.add_argument("--previous", metavar="COMMIT",
                    help="also run COMMIT's store-only claim and claim + finish, on its own "
                         "schema in a database of its own")
    args = ap.parse_args()
    if args.protocol != "extended" and (args.record or not args.no_gate):
        sys.exit("the baseline is measured with unnamed statements, as the handler sends them: "
                 "--protocol prepared needs --no-gate")
    global PROTOCOL
    PROTOCOL = args.protocol
    clients_list = [int(c) for c in args.clients.split(",")]
    paths = list(PATHS)
    for extra in args.path:
        name, spec = extra.split("=", 1)
        table, files = spec.split(":", 1)
        claim, _, finish = files.partition(",")
        finish = [f"benches/claim/{finish}"] if finish else []
        paths.append((name, name, table, [f"benches/claim/{claim}"], finish, {}, KINDS))
    if args.previous:
        paths += previous_paths(args.previous)

    bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
    if not os.path.exists(os.path.join(bindir, "pgbench")):
        bindir = os.path.dirname(shutil.which("pgbench") or sys.exit("pgbench not found"))
    os.makedirs(args.out, exist_ok=True)
    scripts_dir = tempfile.mkdtemp(prefix="hookclaim-bench-scripts-")
    os.chmod(scripts_dir, 0o755)
    written = scripts(paths, scripts_dir)
    vars = variables()

    cluster = Cluster(bindir)
    try:
        subprocess.run(cluster.command("createdb", *cluster.conn_args(), "bench"), check=True)
        for migration in sorted(os.listdir(os.path.join(ROOT, "migrations"))):
            if migration.endswith(".sql"):
                cluster.psql(file=os.path.join(ROOT, "migrations", migration))
        for setup in ["setup.sql", *args.setup]:
            cluster.psql(file=os.path.join(SQL, setup), vars=vars)
        if args.previous:
            setup_previous(cluster, args.previous, vars)
        version = cluster.psql("SHOW server_version")
        print(f"PostgreSQL {version}, port {cluster.port}, pgbench -M {PROTOCOL}; "
              f"{args.rounds} rounds of {args.secs} s "
              f"per path, alternating; load average {os.getloadavg()[0]:.1f} at start", flush=True)
        wal = {}
        for name, *_, kinds in paths:
            wal[name] = {kind: wal_per_delivery(cluster, written[(name, kind)], vars,
                                                DATABASE.get(name, "bench"))
                         for kind in kinds}
        for db in {"bench", *DATABASE.values()}:
            cluster.psql("VACUUM ANALYZE", db=db)
        groups = [(c, kind) for c in clients_list for kind in KINDS]
        results = measure(cluster, paths, written, vars, args.secs, args.rounds, groups, {})
        if not args.record and not args.no_gate:
            # Rates on a shared machine move by 20 % from one run to the next: a ratio below its
            # floor is measured again, as many rounds more, and judged on all of them. A real
            # regression stays below; a round that was unlucky does not decide alone.
            low = below_baseline(gated_ratios(results, clients_list), *baseline())
            again = sorted({(int(c), kind) for _, _, kind, c in (k.split("/") for k in low)})
            if again:
                print(f"below the baseline: {', '.join(low)}; measuring those "
                      f"{len(again)} groups again", flush=True)
                measure(cluster, paths, written, vars, args.secs, args.rounds, again, results)
    finally:
        cluster.stop()
        shutil.rmtree(scripts_dir, ignore_errors=True)

    ratios = gated_ratios(results, clients_list)
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average_at_end": os.getloadavg(),
        "secs": args.secs,
        "protocol": PROTOCOL,
        # Per client count and kind: a group the gate measured again ran more rounds.
        "rounds": {k: len(next(iter(v.values()))) for k, v in results.items()
                   if not k.startswith("cpu/")},
        "medians": {k: {p: statistics.median(v) for p, v in r.items()}
                    for k, r in results.items()},
        "wal_bytes_per_delivery": wal,
        "ratios": ratios,
    }
    with open(os.path.join(args.out, "claim.json"), "w") as f:
        json.dump(report, f, indent=2)
    text = markdown(results, wal, paths, clients_list)
    print(text)
    with open(os.path.join(args.out, "claim.md"), "w") as f:
        f.write(text + "\n")

    if args.record:
        if args.lower:
            # Run after run, the baseline comes down to the lowest each ratio reaches here, so
            # the gate's tolerance is measured from what this machine's noise does, not from
            # one lucky run.
            committed = baseline()[0]
            ratios = {k: min(v, committed.get(k, v)) for k, v in ratios.items()}
        with open(BASELINE, "w") as f:
            json.dump({"tolerance": TOLERANCE, "ratios": ratios}, f, indent=2)
            f.write("\n")
        print(f"recorded {BASELINE}")
    elif not args.no_gate:
        gate(ratios)


def setup_previous(cluster, commit, vars):
    """Database bench_prev: `commit`'s migrations and its ten thousand redelivered rows, stored
    by that commit's own claim."""
    subprocess.run(cluster.command("createdb", *cluster.conn_args(), "bench_prev"), check=True)
    listing = subprocess.run(["git", "-C", ROOT, "ls-tree", "--name-only", commit, "migrations/"],
                             check=True, capture_output=True, text=True).stdout.split()
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        for migration in sorted(m for m in listing if m.endswith(".sql")):
            path = os.path.join(tmp, os.path.basename(migration))
            with open(path, "w") as f:
                f.write(source(f"{commit}:{migration}"))
            os.chmod(path, 0o644)
            cluster.psql(file=path, db="bench_prev")
    cluster.psql(
        "SELECT count(*) FROM generate_series(1, :dup_count) AS g, "
        "hookclaim_claim(:'source', (:dup_base::int8 + g)::text, :'first_owner', :lease_secs, "
        ":'payload', :'sha', :'headers', :'event_type', :'id_origin', true, "
        ":long_key_retention, :replay_guard, :max_attempts)",
        vars=vars, db="bench_prev")


# The guarded paths, shown beside the unguarded ones in a table of their own.
GUARD_TABLE = [("store_only", "guarded_store_only"), ("claim_finish", "guarded_claim_finish")]
GUARD_PATHS = {"guarded_store_only", "guarded_claim_finish", "resent_body"}


def labels_of(paths):
    """Each path's name and label."""
    return {name: label for name, label, *_ in paths}


def markdown(results, wal, paths, clients_list):
    """The results as Markdown tables: rates and ratios, the replay guard's beside them, server
    CPU, WAL. A path that does not run a kind shows "–" there."""
    def median(key, name, fmt):
        values = results[key].get(name)
        return fmt(statistics.median(values)) if values else "–"

    def ratio_cell(path, base, kind, c):
        if path not in results[f"{kind}/{c}"] or base not in results[f"{kind}/{c}"]:
            return "–"
        return f"{ratio(results, path, base, kind, c):.2f}"

    lines = []
    plain = [p for p in paths if p[0] not in GUARD_PATHS]
    shown_ratios = [("store_only", "seeds", "store-only / seeds"),
                    ("claim_finish", "seeds", "claim + finish / seeds"),
                    ("claim_finish", "fair", "claim + finish / fair"),
                    ("store_only", "bare", "claim / bare")]
    if "prev_store_only" in labels_of(paths):
        shown_ratios += [("store_only", "prev_store_only", "store-only / previous"),
                         ("claim_finish", "prev_claim_finish", "claim + finish / previous")]
    lines.append("\n| delivery | clients | " + " | ".join(label + " /s" for _, label, *_ in plain)
                 + " | " + " | ".join(title for *_, title in shown_ratios) + " |")
    lines.append("|---|---:|" + "---:|" * (len(plain) + len(shown_ratios)))
    for kind in KINDS:
        for c in clients_list:
            cells = [median(f"{kind}/{c}", name, lambda v: f"{v:,.0f}") for name, *_ in plain]
            shown = [ratio_cell(p, b, kind, c) for p, b, _ in shown_ratios]
            lines.append(f"| {kind} | {c} | " + " | ".join(cells + shown) + " |")

    guard = [name for pair in GUARD_TABLE for name in pair] + ["resent_body"]
    labels = {name: label for name, label, *_ in paths}
    lines.append("\n| replay guard | clients | " + " | ".join(labels[n] + " /s" for n in guard)
                 + " | guarded / unguarded store-only | guarded / unguarded claim + finish"
                 + " | body re-sent / store-only duplicate |")
    lines.append("|---|---:|" + "---:|" * (len(guard) + 3))
    for kind in KINDS:
        for c in clients_list:
            cells = [median(f"{kind}/{c}", name, lambda v: f"{v:,.0f}") for name in guard]
            shown = [ratio_cell(g, u, kind, c) for u, g in GUARD_TABLE]
            shown.append(ratio_cell("resent_body", "store_only", kind, c))
            lines.append(f"| {kind} | {c} | " + " | ".join(cells + shown) + " |")

    lines.append("\n| server CPU µs per delivery | clients | "
                 + " | ".join(label for _, label, *_ in paths) + " |")
    lines.append("|---|---:|" + "---:|" * len(paths))
    for kind in KINDS:
        for c in clients_list:
            lines.append(f"| {kind} | {c} | " + " | ".join(
                median(f"cpu/{kind}/{c}", n, lambda v: f"{v:.1f}") for n, *_ in paths) + " |")
    lines.append("\n| WAL bytes per delivery | " + " | ".join(label for _, label, *_ in paths) + " |")
    lines.append("|---|" + "---:|" * len(paths))
    for kind in KINDS:
        lines.append(f"| {kind} | " + " | ".join(
            f"{wal[name][kind]:,.0f}" if kind in wal[name] else "–" for name, *_ in paths) + " |")
    return "\n".join(lines)


def gated_ratios(results, clients_list):
    """The ratios the gate holds, as measured: "path/base/kind/clients" -> ratio."""
    return {f"{path}/{base}/{kind}/{c}": round(ratio(results, path, base, kind, c), 3)
            for path, base, kind in GATED for c in clients_list}


def baseline():
    """The committed ratios and their tolerance."""
    if not os.path.exists(BASELINE):
        sys.exit(f"no baseline at {BASELINE}: run with --record")
    committed = json.load(open(BASELINE))
    return committed["ratios"], committed.get("tolerance", TOLERANCE)


def below_baseline(ratios, committed, tolerance, show=False):
    """The measured ratios more than `tolerance` below their `committed` values."""
    low = []
    for key, value in committed.items():
        got = ratios.get(key)
        if got is None:
            continue
        floor = value * (1 - tolerance)
        if show:
            verdict = "ok" if got >= floor else "REGRESSION"
            print(f"  {key:42} {got:.3f} against {value:.3f} (floor {floor:.3f}): {verdict}")
        if got < floor:
            low.append(key)
    return low


def gate(ratios):
    committed, tolerance = baseline()
    failed = below_baseline(ratios, committed, tolerance, show=True)
    if failed:
        sys.exit(f"claim benchmark: {len(failed)} ratio(s) fell more than "
                 f"{tolerance:.0%} below benches/claim/baseline.json: {', '.join(failed)}")
    print("claim benchmark: every ratio within "
          f"{tolerance:.0%} of benches/claim/baseline.json")


if __name__ == "__main__":
    main()
