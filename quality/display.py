"""Turn report dicts into what the templates show: charts (SVG) and table rows.

The paper's reference values are drawn as thin marks next to the project's figures when the
project uses the meme3w preset (Meme3W Stage 2 and Table 9), so a lead sees at a glance how
their annotation compares with the published protocol.
"""

from __future__ import annotations

from django.urls import NoReverseMatch, reverse

from quality import charts

PAPER_STAGE2 = {"target_category": 0.908, "target_entity": 0.813, "text_mention": 0.824, "visual_region": 0.818}
PAPER_TABLE9 = {"target_category": 0.900, "target_entity": 0.797, "text_mention": 0.808, "visual_region": 0.803}
PAPER_TABLE9_MEAN = 0.827


def model_label(row: dict) -> str:
    """ "gpt-x (provider)" only when the provider's name does not already say the model."""
    return row["provider"] if row["provider"] == row["model"] else f"{row['provider']} ({row['model']})"


def item_link(*, slug: str, item_id: int) -> str:
    """The item's history/adjudication page when that app provides one, else its image."""
    try:
        return reverse("item_history", args=[slug, item_id])
    except NoReverseMatch:
        return reverse("item_image", args=[slug, item_id])


def paper_refs(project, table: dict) -> dict:
    return table if project.preset == "meme3w" else {}


def headline_chart(project, headline: list[dict]) -> str:
    refs = paper_refs(project, PAPER_STAGE2)
    rows = [
        {
            "label": f"{h['label']} ({h['metric']})",
            "value": h["value"],
            "ci": h["ci"],
            "n": h["n"],
            "reference": refs.get(h["field"]),
        }
        for h in headline
    ]
    return charts.forest(rows, title="Pre-adjudication agreement per target field, with 95% CI", width=720)


def fields_chart(fields: list[dict]) -> str:
    rows = []
    for f in fields:
        for fig in f["figures"]:
            rows.append(
                {"label": f"{f['label']}: {fig['label']}", "value": fig["value"], "ci": fig["ci"], "n": fig["n"]}
            )
    return charts.forest(rows, title="Every agreement figure with its 95% CI", width=720)


def pipeline_chart(rows: list[dict]) -> str:
    return charts.hbar([(r["label"], r["n"], str(r["n"])) for r in rows], title="Items per pipeline stage")


def throughput_charts(by_annotator: list[dict], by_day: list[dict]) -> dict:
    return {
        "annotators": charts.hbar(
            [
                (
                    r["annotator"],
                    r["n"],
                    f"{r['n']} items" + (f" · {r['seconds_per_item']} s/item" if r["seconds_per_item"] else ""),
                )
                for r in by_annotator
            ],
            title="Submitted annotations per annotator",
        ),
        "days": charts.columns(
            [d["day"][5:] for d in by_day],
            [d["n"] for d in by_day],
            title="Annotations submitted per day (last 30 days)",
            label_every=5,
        ),
    }


def over_time_chart(over_time: dict) -> str:
    series = [(f"{s['label']}", [p["value"] for p in s["points"]]) for s in over_time["series"]]
    return charts.lines(over_time["weeks"], series, title="Primary agreement figure per field, by week of completion")


def confusion_charts(confusions: list[dict], names: dict[int, str]) -> list[dict]:
    out = []
    for c in confusions:
        blocks = []
        for m in c["matrices"]:
            if m["pair"] is None:
                who, rows_t, cols_t = "all annotator pairs", "earlier annotation", "later annotation"
            else:
                a, b = (names.get(x, f"#{x}") for x in m["pair"])
                who, rows_t, cols_t = f"{a} vs {b}", a, b
            kappa = "–" if m["kappa"] is None else f"{m['kappa']:.3f}"
            title = f"{c['label']}: {who} (n={m['n']}, κ={kappa})"
            blocks.append(
                {
                    "title": title,
                    "svg": charts.heatmap(
                        c["categories"], m["counts"], title=title, row_title=rows_t, col_title=cols_t
                    ),
                }
            )
        out.append({"label": c["label"], "field": c["field"], "blocks": blocks})
    return out


def histogram_charts(histograms: list[dict]) -> list[dict]:
    out = []
    for h in histograms:
        labels = [f"{i / 10:.1f}–{(i + 1) / 10:.1f}" for i in range(len(h["counts"]))]
        title = f"{h['label']}: distribution of {h['measure']} between annotators (n={h['n']})"
        out.append(
            {
                "field": h["field"],
                "title": title,
                "svg": charts.columns(
                    labels,
                    h["counts"],
                    title=title,
                    threshold=h["threshold"],
                    threshold_label=f"{h['threshold']:g}",
                    label_every=1,
                ),
            }
        )
    return out


def worst_rows(project, worst: list[dict]) -> list[dict]:
    return [{**w, "url": item_link(slug=project.slug, item_id=w["item_id"])} for w in worst]


def anchoring_charts(report: dict) -> dict:
    rows = []
    for m in report["models"]:
        t = m["total"]
        if not t["offered"]:
            continue
        kept = (t["taken"] - t["edited"]) / t["offered"]
        edited = t["edited"] / t["offered"]
        rows.append(
            (
                model_label(m),
                [
                    (kept, "kept", f"taken and kept: {t['taken'] - t['edited']} of {t['offered']} offered fields"),
                    (edited, "edited", f"taken, then edited: {t['edited']} of {t['offered']} offered fields"),
                ],
            )
        )
    overall = charts.stacked(
        rows,
        title="Share of offered field values that annotators took from each hidden model",
        legend=[("kept", "taken unchanged"), ("edited", "taken, then edited")],
    )
    per_field = []
    for f in report["fields"]:
        frows = []
        for m in report["models"]:
            b = next(x for x in m["fields"] if x["field"] == f)
            if b["offered"]:
                frows.append(
                    (
                        model_label(m),
                        [
                            (
                                (b["taken"] - b["edited"]) / b["offered"],
                                "kept",
                                f"kept {b['taken'] - b['edited']} of {b['offered']}",
                            ),
                            (b["edited"] / b["offered"], "edited", f"edited {b['edited']} of {b['offered']}"),
                        ],
                    )
                )
        if frows:
            per_field.append(
                {
                    "field": f,
                    "title": f"{f}: taken from each model",
                    "svg": charts.stacked(frows, title=f"{f}: taken from each model", width=460),
                }
            )
    return {"overall": overall, "per_field": per_field}


def table9_chart(project, table9: dict) -> str:
    refs = paper_refs(project, PAPER_TABLE9)
    rows = [
        {
            "label": f"{r['label']} ({r['metric']})",
            "value": r["value"],
            "ci": r["ci"],
            "n": r["n"],
            "reference": refs.get(r["field"]),
        }
        for r in table9["rows"]
    ]
    if table9["rows"]:
        rows.append(
            {
                "label": "Unweighted mean",
                "value": table9["mean"],
                "ci": None,
                "n": "",
                "reference": PAPER_TABLE9_MEAN if refs else None,
            }
        )
    return charts.forest(rows, title="Blind vs gold per target field (Table 9 layout)", width=720)


def model_ranking_chart(models: dict) -> str:
    key = models.get("ranking_key")
    rows = []
    for r in models.get("rows", []):
        for ref in ("gold", "blind"):
            v = (r["scores"].get(ref) or {}).get(key)
            rows.append((f"{model_label(r)} vs {ref}", v or 0.0, "–" if v is None else f"{v:.3f}", f"ref-{ref}"))
    return charts.hbar(
        rows,
        title=f"Candidate models scored against gold and against the blind annotations "
        f"({models.get('ranking_metric') or ''})",
        max_value=1.0,
    )
