"""Boxes on the image, [x1, y1, x2, y2] in [0, 1000]."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from scipy.optimize import linear_sum_assignment

from metrics.boxes import enclosing_iou, enclosing_iou_batch, iou
from projects.fieldtypes.base import CONTINUOUS, MAX_DRAFT_LIST, Agreement, Context, FieldError, FieldType

# ---------------------------------------------------------------------------------- boxes


class BoxesType(FieldType):
    name = "boxes"
    widget = "boxes"
    label = "Boxes on the image"
    agreement = Agreement(
        CONTINUOUS, "enclosing_iou", "share IoU ≥ 0.75", measure="IoU", shares=(0.75, 0.5), primary="share_0.75"
    )
    threshold_key = "region_iou"
    roles = frozenset({"region", "grounding"})
    spec_keys = ("max_boxes",)
    evaluation_kind = "boxes"
    scale = 1000
    max_boxes = 50

    def arrow_type(self, spec: dict | None = None) -> pa.DataType:
        return pa.list_(pa.list_(pa.int32()))

    def absent(self, spec: dict) -> Any:
        return []

    def is_absent(self, spec: dict, value: Any) -> bool:
        return value is None or value == []

    def shape_error(self, spec: dict, value: Any) -> str | None:
        if not isinstance(value, list) or len(value) > MAX_DRAFT_LIST:
            return "must be a list of boxes"
        for box in value:
            if not (
                isinstance(box, list)
                and len(box) == 4
                and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in box)
            ):
                return "each box must be [x1, y1, x2, y2]"
        return None

    def _box(self, box: Any, *, lenient: bool) -> list[int]:
        if not isinstance(box, (list, tuple)) or len(box) != 4:
            raise FieldError("each box must be [x1, y1, x2, y2]")
        coords = []
        for c in box:
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c):
                raise FieldError("box coordinates must be numbers")
            if isinstance(c, float):
                if not lenient and not c.is_integer():
                    raise FieldError("box coordinates must be integers")
                c = int(round(c))
            coords.append(int(c))
        x1, y1, x2, y2 = coords
        if not all(0 <= c <= self.scale for c in coords):
            raise FieldError(f"box coordinates must lie in [0, {self.scale}]")
        if not (x1 < x2 and y1 < y2):
            raise FieldError("a box needs x1 < x2 and y1 < y2")
        return coords

    def validate(self, spec: dict, value: Any, ctx: Context) -> Any:
        if not isinstance(value, list):
            raise FieldError("must be a list of boxes")
        if len(value) > spec.get("max_boxes", self.max_boxes):
            raise FieldError(f"at most {spec.get('max_boxes', self.max_boxes)} boxes")
        return [self._box(b, lenient=False) for b in value]

    def normalize_candidate(self, spec: dict, value: Any, ctx: Context) -> tuple[Any, list[str]]:
        if (
            isinstance(value, (list, tuple))
            and len(value) == 4
            and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in value)
        ):
            value = [list(value)]  # a single bare box
        if not isinstance(value, list):
            raise FieldError("must be a list of boxes")
        kept, notes = [], []
        for i, box in enumerate(value[: spec.get("max_boxes", self.max_boxes)]):
            # Other conventions (0-1 floats, pixels) are not guessed at (SPEC section 1, step 1).
            if (
                isinstance(box, (list, tuple))
                and len(box) == 4
                and all(isinstance(c, float) for c in box)
                and all(0.0 <= c <= 1.0 for c in box)
                and any(not float(c).is_integer() for c in box)
            ):
                notes.append(f"box {i}: looks like 0-1 coordinates, dropped (not rescaled)")
                continue
            try:
                kept.append(self._box(box, lenient=True))
            except FieldError as exc:
                notes.append(f"box {i}: {exc}, dropped")
        if value and not kept:
            raise FieldError("no valid box: " + "; ".join(notes))
        return kept, notes

    def canonical(self, spec: dict, value: Any) -> Any:
        return sorted(tuple(b) for b in value or [])

    def similarity(self, spec: dict, a: Any, b: Any, *, lexicon: dict | None) -> float | None:
        return enclosing_iou(a, b)

    def auto_merge(self, spec: dict, values: list, *, rules: set[str], lexicon: dict | None) -> tuple[Any, str] | None:
        """``boxes_mean``: same number of boxes, matched one-to-one by IoU (Hungarian), averaged."""
        if "boxes_mean" not in rules or not values or any(not v for v in values):
            return None
        if len({len(v) for v in values}) != 1:
            return None
        base = values[0]
        stacked = [np.array(base, dtype=float)]
        for other in values[1:]:
            cost = np.array([[-iou(a, b) for b in other] for a in base])
            rows, cols = linear_sum_assignment(cost)
            if any(-cost[r, c] < 0.5 for r, c in zip(rows, cols)):
                return None  # some box has no counterpart: not a minor difference to average
            stacked.append(np.array([other[c] for c in cols], dtype=float)[np.argsort(rows)])
        mean = np.rint(np.mean(stacked, axis=0)).astype(int).tolist()
        return [self._box(b, lenient=True) for b in mean], "boxes_mean"

    def agreement_value(self, spec: dict, value: Any) -> Any:
        return [b for b in value if isinstance(b, (list, tuple)) and len(b) == 4] if isinstance(value, list) else []

    def pair_scores(self, spec: dict, a: Sequence[Any], b: Sequence[Any], *, lexicon: dict | None) -> np.ndarray:
        return enclosing_iou_batch(list(a), list(b))

    def display_text(self, spec: dict, value: Any) -> str:
        if not value:
            return "no box"
        n = len(value)
        return f"{n} box{'es' if n != 1 else ''}: " + "; ".join("[" + ", ".join(str(c) for c in b) + "]" for b in value)

    def prompt_value(self, spec: dict) -> str:
        return (
            "a list of boxes [x1, y1, x2, y2], integers normalized to [0, 1000] of the image width and height, "
            "(x1, y1) top-left and (x2, y2) bottom-right, x1 < x2 and y1 < y2, one box per visual instance"
        )

    def prompt_example(self, spec: dict) -> Any:
        return [["x1", "y1", "x2", "y2"]]

    def widget_config(self, spec: dict) -> dict:
        return {"max_boxes": spec.get("max_boxes", self.max_boxes)}
