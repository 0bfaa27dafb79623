#!/usr/bin/env python3
"""Merges the benchmark outputs in target/bench into results.json and renders results.md.

Usage: python3 benches/report.py [target/bench]   (scripts/bench runs it last)
"""

import glob
import json
import os
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else "target/bench"
TARGETS = {
    "ratio": 0.8,
    "verify_ratio": 0.95,
    "first_next_ms": 20.0,
    "peak_rss_mib": 32.0,
    "purge_p99_ratio": 2.0,
    "claim_vs_bare_new": 0.75,
    "claim_vs_bare_duplicate": 0.9,
}


def load(name):
    path = os.path.join(OUT, name + ".json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return None


def criterion():
    """Mean time per iteration (ns) of every criterion benchmark, by group and function."""
    root = os.path.join(os.path.dirname(os.path.abspath(OUT)), "criterion")
    found = {}
    for path in glob.glob(os.path.join(root, "*", "*", "*", "new", "estimates.json")):
        parts = path.split(os.sep)
        group, function, param = parts[-5], parts[-4], parts[-3]
        with open(path) as f:
            est = json.load(f)
        found.setdefault(group, {})[function] = {
            "size": param,
            "mean_ns": est["mean"]["point_estimate"],
            "ci_ns": [est["mean"]["confidence_interval"]["lower_bound"],
                      est["mean"]["confidence_interval"]["upper_bound"]],
        }
    return found


def verify_table(crit):
    rows = []
    sizes = {"1KB": 1024, "64KB": 65536, "1MB": 1048576}
    for label, size in sizes.items():
        group = crit.get("verify_" + label)
        if not group or "sha256" not in group:
            continue
        base = group["sha256"]["mean_ns"]
        row = {"size": label, "sha256_mb_s": size / base * 1e3}
        for name in ("github", "stripe", "standard", "handler_hashing_github"):
            if name in group:
                t = group[name]["mean_ns"]
                row[name] = {"mb_s": size / t * 1e3, "us": t / 1e3, "ratio_vs_sha256": base / t}
        rows.append(row)
    return rows


def fmt(v, digits=0):
    if v is None:
        return "–"
    if isinstance(v, float) and v != v:
        return "–"
    return f"{v:,.{digits}f}"


def mark(ok):
    return "✅" if ok else "❌"


def throughput_table(out, rows, title):
    out.append(f"### Throughput and latency, handler versus pgbench: {title}")
    out.append("")
    out.append("| processor | delivery | envs / clients | handler /s | pgbench /s | ratio | handler p50 / p99 µs | pgbench p50 / p99 µs | CPU µs per delivery, client + server (handler · pgbench) | pgbench's own CPU (cores) | machine cores busy (handler · pgbench) |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        hh, pb = row["handler"], row["pgbench"]
        ok = row["ratio"] >= TARGETS["ratio"]
        out.append(
            f"| {row['processor']} | {row['kind']} | {row['clients']} | "
            f"{fmt(hh['deliveries_per_s'])} | {fmt(pb['deliveries_per_s'])} | "
            f"{fmt(row['ratio'], 2)} {mark(ok)} | "
            f"{fmt(hh['latency']['p50_us'])} / {fmt(hh['latency']['p99_us'])} | "
            f"{fmt(pb['latency']['p50_us'])} / {fmt(pb['latency']['p99_us'])} | "
            f"{fmt(hh['cpu_us_per_delivery']['client'])} + {fmt(hh['cpu_us_per_delivery']['server'])} · "
            f"{fmt(pb['cpu_us_per_delivery']['client'])} + {fmt(pb['cpu_us_per_delivery']['server'])} | "
            f"{fmt(pb['cpu_cores']['pgbench'], 2)} | "
            f"{fmt(hh['cpu_cores']['whole_machine'], 2)} · {fmt(pb['cpu_cores']['whole_machine'], 2)} |")
    out.append("")


def statements_tables(out, st):
    out.append("### The claim statement versus the bare dedupe insert (pgbench -M prepared, alternating rounds)")
    out.append("")
    out.append("The store-only claim as the handler sends it, against `" + " ".join(st["bare_insert"].split())
               + "` into a table of key and payload only, with the same 1 KB payload; duplicates are "
               "redeliveries of 10,000 finished rows.")
    out.append("")
    out.append("With the cores shared, pgbench (formatting every parameter as text) competes with the "
               "server for the same two cores; with the server on its own core, the rate is the "
               "database's capacity for the statement.")
    out.append("")
    out.append("| CPUs | delivery | clients | bare insert /s | claim /s | claim / bare | target | bare p50 / p99 µs | claim p50 / p99 µs | server CPU µs per statement (bare · claim) |")
    out.append("|---|---|---:|---:|---:|---:|---|---:|---:|---:|")
    for row in st["rows"]:
        b, k = row["bare"], row["claim"]
        target = TARGETS["claim_vs_bare_new" if row["kind"] == "new" else "claim_vs_bare_duplicate"]
        out.append(f"| {row.get('placement', 'cores shared')} | {row['kind']} | {row['clients']} | {fmt(b['deliveries_per_s'])} | {fmt(k['deliveries_per_s'])} | "
                   f"{fmt(row['ratio'], 2)} | ≥ {target} {mark(row['ratio'] >= target)} | "
                   f"{fmt(b['latency']['p50_us'])} / {fmt(b['latency']['p99_us'])} | "
                   f"{fmt(k['latency']['p50_us'])} / {fmt(k['latency']['p99_us'])} | "
                   f"{fmt(b['cpu_us_per_delivery']['server'])} · {fmt(k['cpu_us_per_delivery']['server'])} |")
    out.append("")
    out.append(f"### WAL and buffers per statement ({st['wal_deliveries']:,} statements from one client)")
    out.append("")
    out.append("| statement | delivery | WAL bytes per delivery (WAL position) | WAL bytes per statement | WAL records per statement | buffers dirtied per statement | shared buffers accessed per statement | executing µs |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for c in st["costs"]:
        m = c["statement"]
        name = "bare insert" if c["side"] == "bare" else "claim"
        out.append(f"| {name} | {c['kind']} | {fmt(c['wal_bytes_per_delivery'], 1)} | {fmt(m['wal_bytes'], 1)} | "
                   f"{fmt(m['wal_records'], 2)} | {fmt(m['shared_blks_dirtied'], 3)} | "
                   f"{fmt(m['shared_blks_accessed'], 1)} | {fmt(m['exec_us'], 1)} |")
    out.append("")
    out.append("The WAL position counts everything written between the first and the last statement "
               "(commit records included); the per-statement columns are pg_stat_statements' for the "
               "statement alone.")
    out.append("")


def instructions_table(out, ins):
    out.append("### Server instructions per statement (callgrind, one connection)")
    out.append("")
    out.append("What the backend executes per statement, the connection's start taken out: the "
               "server's work, which does not move with the machine's load.")
    out.append("")
    out.append("| delivery | bare insert | claim | claim / bare | a plain read of the key with the payload bound | read / bare |")
    out.append("|---|---:|---:|---:|---:|---:|")
    for row in ins["rows"]:
        read = row.get("plain_read")
        out.append(f"| {row['kind']} | {fmt(row['bare'])} | {fmt(row['claim'])} | {fmt(row['claim_over_bare'], 3)} | "
                   f"{fmt(read) if read else '–'} | {fmt(row['plain_read_over_bare'], 3) if read else '–'} |")
    out.append("")


def render(r):
    out = []
    m = r.get("machine", {})
    out.append(f"Measured {m.get('date', '?')} with `{m.get('command', 'scripts/bench')}` on "
               f"{m.get('nproc', '?')} × {m.get('cpu', '?')} ({m.get('virtualisation', '?')}), "
               f"{m.get('memory_gib', '?')} GiB, Linux {m.get('kernel', '?')}; "
               f"{m.get('rustc', '')}, {m.get('postgres', '')}; commit {m.get('git_commit', '?')}"
               f"{' + uncommitted changes' if m.get('git_dirty') else ''}; load average at start "
               f"{' '.join(m.get('load_average_at_start', []))}.")
    out.append("")

    h = r.get("handler") or {}
    modes = {
        "direct": "direct connection, statements prepared once per connection (pgbench -M prepared)",
        "pooled": "`DATABASE_POOLED=true`, unnamed statements as behind a transaction pooler (pgbench -M extended)",
    }
    for key, where in (("throughput", "client and server share both cores"),
                       ("throughput_pinned", "benchmark process on CPU 0, PostgreSQL on CPU 1")):
        rows = (h.get(key) or {}).get("rows") or []
        for mode, how in modes.items():
            mine = [row for row in rows if row.get("connection", "direct") == mode]
            if mine:
                throughput_table(out, mine, f"{how}; {where}")
    tp = h.get("throughput")
    if tp:
        cs = h.get("client_side")
        if cs:
            out.append(f"Per delivery in the benchmark process, outside the handler: building the signed "
                       f"{cs['event_bytes']}-byte event {fmt(cs['build_signed_event_us'], 1)} µs (the "
                       f"sender's and API Gateway's work, not in the latencies); the runtime's event parse "
                       f"{fmt(cs['runtime_event_parse_us'], 1)} µs (in the handler latencies).")
            out.append("")

    counts = h.get("counts")
    if counts:
        out.append("### Statements and round trips per delivery (counted on the server and on the wire)")
        out.append("")
        out.append("| processor | delivery | statements (pg_stat_statements) | round trips (proxy) | target | statements |")
        out.append("|---|---|---:|---:|---|---|")
        targets = {("store", "new"): 1, ("store", "duplicate"): 1,
                   ("licence", "new"): 2, ("licence", "duplicate"): 1}
        for proc in ("store", "licence"):
            for kind in ("new", "duplicate"):
                c = counts[proc][kind]
                t = targets[(proc, kind)]
                rt = c["round_trips_per_delivery"]
                stmts = "; ".join(
                    f"{s['statement'][:40]}… ×{fmt(s['per_delivery'], 2)}" for s in c["statements"])
                out.append(f"| {proc} | {kind} | {fmt(c['statements_per_delivery'], 2)} | "
                           f"{fmt(rt, 2)} | ≤ {t} {mark(rt <= t + 1e-9)} | {stmts} |")
        out.append("")

    st = h.get("statements")
    if st:
        statements_tables(out, st)
    ins = h.get("instructions")
    if ins:
        instructions_table(out, ins)

    crit = r.get("verify") or []
    if crit:
        out.append("### Verification versus plain SHA-256 over the same bytes (criterion, mean)")
        out.append("")
        paired = {p["size"]: p for p in (r.get("verify_paired") or [])}
        out.append("| body | SHA-256 MB/s | GitHub verify MB/s | ratio of means | ratio, interleaved rounds (median, p10–p90) | Stripe verify MB/s (parses JSON) | Standard verify MB/s (parses JSON) | handler hashing (verify + payload SHA-256) MB/s |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in crit:
            g = row.get("github", {})
            ratio = g.get("ratio_vs_sha256")
            need = row["size"] != "1KB"
            pr = paired.get(row["size"])
            pcell = "–"
            if pr:
                pcell = (f"{fmt(pr['ratio_median'], 3)}"
                         f"{(' ' + mark(pr['ratio_median'] >= TARGETS['verify_ratio'])) if need else ''}"
                         f" ({fmt(pr['ratio_p10'], 2)}–{fmt(pr['ratio_p90'], 2)})")
            out.append(
                f"| {row['size']} | {fmt(row['sha256_mb_s'])} | {fmt(g.get('mb_s'))} | "
                f"{fmt(ratio, 3)} | {pcell} | "
                f"{fmt(row.get('stripe', {}).get('mb_s'))} | {fmt(row.get('standard', {}).get('mb_s'))} | "
                f"{fmt(row.get('handler_hashing_github', {}).get('mb_s'))} |")
        out.append("")

    cold = r.get("coldstart")
    if cold:
        n = cold["to_first_next_ms"]
        a = cold["to_first_answer_ms"]
        nd = cold["to_first_next_without_database_ms"]
        fl = cold["spawn_and_reap_true_ms"]
        mem = cold["memory"]
        hwm = mem["after_deliveries"]["vm_hwm_kib"] / 1024
        out.append("### Cold start and memory (release binary, x86_64, local Runtime API)")
        out.append("")
        out.append("| measure | min | p50 | p90 | max | target |")
        out.append("|---|---:|---:|---:|---:|---|")
        out.append(f"| process start → first GET /next (ms) | {fmt(n['min'], 1)} | {fmt(n['p50'], 1)} | "
                   f"{fmt(n['p90'], 1)} | {fmt(n['max'], 1)} | ≤ 20 {mark(n['p50'] <= TARGETS['first_next_ms'])} |")
        out.append(f"| process start → first answer, incl. database connect (ms) | {fmt(a['min'], 1)} | "
                   f"{fmt(a['p50'], 1)} | {fmt(a['p90'], 1)} | {fmt(a['max'], 1)} | |")
        out.append(f"| process start → first GET /next, database unreachable (ms) | {fmt(nd['min'], 1)} | "
                   f"{fmt(nd['p50'], 1)} | {fmt(nd['p90'], 1)} | {fmt(nd['max'], 1)} | |")
        out.append(f"| start and reap `/bin/true` (ms, the floor) | {fmt(fl['min'], 1)} | {fmt(fl['p50'], 1)} | "
                   f"{fmt(fl['p90'], 1)} | {fmt(fl['max'], 1)} | |")
        out.append("")
        out.append(f"RSS after the cold start {fmt(mem['after_cold_start']['vm_rss_kib'] / 1024, 1)} MiB; "
                   f"peak RSS (VmHWM) after {mem['deliveries']:,} deliveries **{fmt(hwm, 1)} MiB** "
                   f"(target ≤ 32 {mark(hwm <= TARGETS['peak_rss_mib'])}); "
                   f"{fmt(mem['deliveries_per_s_through_runtime_api'])} deliveries/s through the Runtime API "
                   f"from one process; {mem['bad_answers']} bad answers.")
        out.append("")

    sizes = r.get("sizes")
    if sizes:
        out.append("### Binary sizes (`cargo lambda build --release`, stripped)")
        out.append("")
        out.append("| target | webhook | retention |")
        out.append("|---|---:|---:|")
        for arch in ("x86_64", "arm64"):
            cells = []
            for b in ("webhook", "retention"):
                s = sizes.get(f"{arch}/{b}")
                cells.append(f"{s['bytes'] / 1024 / 1024:.1f} MiB ({s['bytes']:,} B)" if s else "build failed")
            out.append(f"| {arch} | {cells[0]} | {cells[1]} |")
        if sizes.get("arm64_error"):
            out.append("")
            out.append("arm64 build failed:")
            out.append("")
            out.append("```")
            out.append(sizes["arm64_error"])
            out.append("```")
        out.append("")

    p = h.get("purge")
    if p:
        wo = p["claims_without_purge"]["latency"]
        wi = p["claims_during_purge"]["latency"]
        ok = p["p99_ratio"] <= TARGETS["purge_p99_ratio"]
        out.append(f"### Retention purge ({p['rows']:,} rows of {p['payload_bytes']} B payloads, batches of {p['batch_size']:,})")
        out.append("")
        out.append(f"- purge alone: {p['purge_alone']['purged']:,} rows in {fmt(p['purge_alone']['secs'], 1)} s = "
                   f"**{fmt(p['purge_alone']['rows_per_s'])} rows/s**")
        out.append(f"- purge with {p['claimants']} environments claiming new deliveries: "
                   f"{fmt(p['purge_during_claims']['rows_per_s'])} rows/s")
        out.append("")
        offered = p.get("claims_per_s_offered")
        paced = f", {p['claimants']} environments offering {fmt(offered)}/s" if offered else ""
        out.append(f"| concurrent claims (store-only, new{paced}) | deliveries/s | p50 µs | p99 µs | max µs |")
        out.append("|---|---:|---:|---:|---:|")
        out.append(f"| without a purge | {fmt(p['claims_without_purge']['deliveries_per_s'])} | {fmt(wo['p50_us'])} | {fmt(wo['p99_us'])} | {fmt(wo['max_us'])} |")
        out.append(f"| during the purge | {fmt(p['claims_during_purge']['deliveries_per_s'])} | {fmt(wi['p50_us'])} | {fmt(wi['p99_us'])} | {fmt(wi['max_us'])} |")
        out.append("")
        out.append(f"p99 during / without: **{fmt(p['p99_ratio'], 2)}** (target ≤ 2 {mark(ok)})")
        out.append("")
    return "\n".join(out)


def main():
    results = {}
    for name in ("machine", "sizes", "handler", "coldstart", "verify_paired"):
        v = load(name)
        if v is not None:
            results[name] = v
    crit = criterion()
    if crit:
        results["verify"] = verify_table(crit)
        results["criterion_raw"] = crit
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    md = render(results)
    with open(os.path.join(OUT, "results.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    print(f"\nwrote {OUT}/results.json and {OUT}/results.md")


if __name__ == "__main__":
    main()
