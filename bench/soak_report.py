"""The soak's figures: ``docs/cluster-faults.json`` (every run, by engine line: a new run is added
to the earlier ones) and ``docs/cluster-faults.md`` (its tables: per run and per engine line, per
fault kind over all runs of a line, per event)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vsparta.bench.fault_events import KINDS, PARTITIONS
from vsparta.bench.hardware import describe, one_line
from vsparta.bench.options import command_line

JSON_NAME, MD_NAME = "cluster-faults.json", "cluster-faults.md"


def _spread(values: Iterable[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "-"
    return f"{statistics.median(got):.0f} / {max(got):.0f}"


def _stale_reads(loads: list[dict[str, Any]]) -> int | str:
    """Acknowledged documents a first read missed and a read once whole found ("-": runs written
    before this was counted)."""
    if any("stale_reads" not in o for o in loads):
        return "-"
    return sum(o["stale_reads"] for o in loads)


def _totals(result: dict[str, Any]) -> dict[str, Any]:
    events = result["events"]
    answers = result["answers"]
    statuses = answers["statuses"]
    return {
        "events": len(events),
        "partitions": sum(e["kind"] in PARTITIONS for e in events),
        "kills": sum(e["kind"] == "kill" for e in events),
        "slow": sum(e["kind"] == "slow-link" for e in events),
        "answers": answers["answers"],
        "503": statuses.get("503", 0),
        "500": statuses.get("500", 0),
        "mismatched": answers["mismatched"],
        "acked_lost": sum(o["lost_acknowledged"] for o in result["loads"]),
        "stale_reads": _stale_reads(result["loads"]),
        "resumes": sum(len(o["exits"]) - 1 for o in result["loads"]),
        "lost": result["index"]["lost"],
        "duplicated": result["index"]["duplicated"],
        "wrong_weights": result["index"]["wrong_weights"],
    }


def _all_runs(line: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs of one engine line as one: events, loads and answers added up."""
    answers = {"answers": 0, "statuses": {}, "mismatched": 0}
    index = {"lost": 0, "duplicated": 0, "wrong_weights": 0, "found": 0, "expected": 0}
    for r in runs:
        answers["answers"] += r["answers"]["answers"]
        answers["mismatched"] += r["answers"]["mismatched"]
        for code, n in r["answers"]["statuses"].items():
            answers["statuses"][code] = answers["statuses"].get(code, 0) + n
        for key in index:
            index[key] += r["index"][key]
    return {
        "line": f"{line}, all {len(runs)} runs",
        "minutes": round(sum(r["minutes"] for r in runs), 1),
        "events": [e for r in runs for e in r["events"]],
        "loads": [o for r in runs for o in r["loads"]],
        "answers": answers,
        "index": index,
    }


def table(results: list[dict[str, Any]], kinds_over: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """Markdown: one row per result, then one per (engine line, fault kind) over the runs of each
    line in ``kinds_over`` (default: each result on its own)."""
    out = [
        "| engine line | minutes | events (cuts / kills / slow) | answers | 503 | 500 "
        "| not the oracle's top-k | loads (resumed runs) | acked docs lost (read stale at first) "
        "| docs lost / duplicated / wrong weights | index docs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        t = _totals(r)
        out.append(
            f"| {r['line']} | {r['minutes']} "
            f"| {t['events']} ({t['partitions']} / {t['kills']} / {t['slow']}) "
            f"| {t['answers']} | {t['503']} | {t['500']} | {t['mismatched']} "
            f"| {len(r['loads'])} ({t['resumes']}) "
            f"| {t['acked_lost']} ({t['stale_reads']}) "
            f"| {t['lost']} / {t['duplicated']} / {t['wrong_weights']} "
            f"| {r['index']['found']} of {r['index']['expected']} |"
        )
    out += [
        "",
        "| engine line | fault | events | new master after, s (median / max) "
        "| heal to green, s (median / max) | 503 per event (median / max) | 500 |",
        "|---|---|---|---|---|---|---|",
    ]
    for line, runs in (kinds_over or {r["line"]: [r] for r in results}).items():
        r = _all_runs(line, runs) if len(runs) > 1 else runs[0]
        for kind in KINDS:
            ev = [e for e in r["events"] if e["kind"] == kind]
            if ev:
                out.append(
                    f"| {r['line']} | {kind} | {len(ev)} | {_spread(e['new_master_s'] for e in ev)} "
                    f"| {_spread(e['heal_to_green_s'] for e in ev)} | {_spread(e['503'] for e in ev)} "
                    f"| {sum(e['500'] for e in ev)} |"
                )
    return "\n".join(out)


def events_table(result: dict[str, Any]) -> str:
    out = [
        "| t, s | fault | node (role) | new master after, s | held, s | heal to green, s "
        "| answers | 503 | 500 | not top-k |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in result["events"]:
        master = "-" if e["new_master_s"] is None else e["new_master_s"]
        out.append(
            f"| {e['start']} | {e['kind']} | {e['node']} ({e['role']}) | {master} | {e['held_s']} "
            f"| {e['heal_to_green_s']} | {e['answers']} | {e['503']} | {e['500']} | {e['mismatched']} |"
        )
    return "\n".join(out)


def write(results: list[dict[str, Any]], out_dir: Path) -> None:
    """Add ``results`` to the JSON's runs of their engine lines, and write the markdown from all."""
    path = out_dir / JSON_NAME
    merged = json.loads(path.read_text()) if path.exists() else {"lines": {}}
    stamp = {"command": command_line("soak"), "machine": describe()}
    for line, runs in merged["lines"].items():
        if isinstance(runs, dict):  # written when the file kept one run per line
            merged["lines"][line] = [runs]
    for r in results:
        merged["lines"].setdefault(r["line"], []).append(r | stamp)
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=2) + "\n")
    runs = [r for line_runs in merged["lines"].values() for r in line_runs]
    totals = [_all_runs(line, rs) for line, rs in merged["lines"].items() if len(rs) > 1]
    md = [
        "# The cluster under partitions, slow links and kills: the soak",
        "",
        "Written by `vsparta bench soak` (`bench/soak.py`); how it breaks the cluster and what it "
        "checks is in [cluster-faults-method.md](cluster-faults-method.md). Runs are added up per "
        "engine line (the `all runs` rows; the fault table is over all runs of a line).",
        "",
        table(runs + totals, merged["lines"]),
        "",
    ]
    for n, r in enumerate(runs, 1):
        md += [
            f"## Run {n}: {r['line']}",
            "",
            f"`{r['command']}`, {one_line(r['machine'])}; cluster start {r.get('cluster_start_s', '?')} s; "
            f"serving settings after: {r['settings_after']}.",
            "",
            events_table(r),
            "",
        ]
    (out_dir / MD_NAME).write_text("\n".join(md))
