"""The independence study in a release: ``independence_study.json`` (every confirmed study's
report, studies.selectors.study_report) and its section of the datasheet README."""

from __future__ import annotations

from projects.models import Project
from studies.selectors import studies_for_release

RELEASE_FILE = "independence_study.json"


def release_studies(*, project: Project) -> dict | None:
    """The file's content, or None when the project has no confirmed study (no file then)."""
    studies = studies_for_release(project=project)
    if not studies:
        return None
    return {"format": "concord-independence-studies", "studies": studies}


def _pct(share) -> str:
    return "—" if share is None else f"{100 * share:.1f}%"


def _ci(ci) -> str:
    return "—" if not ci else f"{100 * ci[0]:.1f}–{100 * ci[1]:.1f}%"


def datasheet_section(content: dict | None) -> str:
    """Markdown for the README (empty without a study)."""
    if not content:
        return ""
    lines = ["", "## Reference-independence study", ""]
    for r in content["studies"]:
        s, c, f = r["study"], r["compatible"], r["fully"]
        lines += [
            f"### {s['name']}",
            "",
            f"{r['sampled']} items sampled from {s['eligible_items']} eligible (asked {s['sample_size_asked']}, "
            f"seed {s['seed']}), stratified over {' × '.join(s['strata_fields']) or 'nothing'}; {s['protocol']}. "
            f"Details in `{RELEASE_FILE}`.",
            "",
            f"- **{_pct(c['share'])} of references fully or partially compatible** ({c['k']} of {c['n']} decided "
            f"items; Wilson 95% CI {_ci(c['ci'])}); fully compatible {_pct(f['share'])} ({f['k']} of {f['n']}, "
            f"CI {_ci(f['ci'])}).",
            f"- Conflicts (the two verdicts of an item differ): {r['conflicts']['items']}, "
            f"{r['conflicts']['adjudicated']} adjudicated, {r['conflicts']['open']} open.",
            f"- Revisions of references it led to: {r['revisions']['count']}; removals: {r['removals']['count']}"
            + (
                " (" + ", ".join(f"{k}: {n}" for k, n in r["removals"]["by_reason"].items()) + ")"
                if r["removals"]["count"]
                else ""
            )
            + ".",
            "",
            "| stratum | sampled | decided | compatible | 95% CI | fully |",
            "|---|---|---|---|---|---|",
        ]
        for st in r["strata"]:
            label = st["label"].replace("|", "\\|")
            lines.append(
                f"| {label} | {st['sampled']} | {st['decided']} | {_pct(st['compatible']['share'])} | "
                f"{_ci(st['compatible']['ci'])} | {_pct(st['fully']['share'])} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"
