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
    "verify_ratio": 0.95,
    "first_next_ms": 20.0,
    "peak_rss_mib": 32.0,
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

    claim = r.get("claim_md")
    if claim:
        out.append("### The claim against a bare insert and a two-statement handler (`benches/claim.py`)")
        out.append("")
        out.append(claim.strip())
        out.append("")

    recovery = r.get("recovery_md")
    if recovery:
        rec = r.get("recovery") or {}
        out.append("### Recovery: an outage's backlog against a normal day (`benches/recovery.py`)")
        out.append("")
        out.append(f"{rec.get('rounds', '?')} rounds; pgbench -M extended, {rec.get('clients', '?')} "
                   f"client(s), {rec.get('secs', '?')} s runs; `retention run --deadline-secs "
                   f"{rec.get('deadline_secs', '?')}` from a terminal, store-only processor "
                   f"({rec.get('binary', '?')}).")
        out.append("")
        out.append(recovery.strip())
        out.append("")

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

    return "\n".join(out)


def main():
    results = {}
    for name in ("machine", "sizes", "claim", "recovery", "coldstart", "verify_paired"):
        v = load(name)
        if v is not None:
            results[name] = v
    claim_md = os.path.join(OUT, "claim.md")
    if os.path.exists(claim_md):
        with open(claim_md) as f:
            results["claim_md"] = f.read()
    recovery_md = os.path.join(OUT, "recovery.md")
    if os.path.exists(recovery_md):
        with open(recovery_md) as f:
            results["recovery_md"] = f.read()
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
