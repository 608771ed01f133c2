"""A project's workflow: an ordered list of stages, as data (SPEC section 7; issue 14).

Each stage owns a part of the schema (its ``fields``), how many annotators work an item in it
(a number, or one per split / per metadata value: MemeCap collects one meme caption for train
items and 2-4 for test items), who may work it (every annotator or a named pool of them, and
"not the people who worked stage k"), what its page shows (the image or its text-free variant, the item text, the title,
the values written in earlier stages), which flags send an item out of the dataset, and how its
results become gold:

- ``adjudicate``: the annotators' records are compared, identical or auto-merged ones become
  gold, the rest go to a reviewer (Meme3W, AHA). Only a one-stage workflow adjudicates: a
  later stage would otherwise build on values nobody has settled yet.
- ``references``: nothing is adjudicated; every annotator's value is kept and exported as a
  list of references (MemeCap's captions, each with its pseudonymous annotator).
- ``value``: the stage has one annotator, whose value becomes the gold value itself, not a
  one-element list (MemeBench's reference explanation and its QC'd checklists).

Two kinds of stage are not worked by annotators alone:

- a *model* stage (``"model": {...}``) is run by a configured LLM, not a person: when an item
  enters it, a conversion job (candidates.models.Conversion) sends the image and the values of
  the stage's ``source`` stage with the stage's prompt, and the reply fills the stage's
  fields (MemeBench section 3: the human explanation converted into the VIKR checklists).
- a *review* stage (``"review": "<model stage>"``) is a human stage whose fields are those of
  the model stage it reviews, pre-filled with the model's reply: the reviewer accepts, edits or
  removes the item (flags); its values become gold.

A project without a ``workflow`` has one stage: every field, ``annotators_per_item``
annotators, adjudicated, candidates shown -- exactly the one-round behaviour of before.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from projects.fieldtypes import SchemaError
from projects.schema import Schema

GOLD_MODES = ("adjudicate", "references", "value")
#: How a stage's form starts: empty, or (``agreement``) with every field on whose value more
#: than half of the candidates the annotator sees agree (annotation.services.claims).
PREFILL_MODES = ("none", "agreement")
IMAGES = ("original", "textfree")
#: Reasons an annotator may give for sending an item out of the dataset (MemeCap section 3.2:
#: "memes that workers in each of the rounds marked as offensive, sexual, hateful, or
#: uninterpretable" are excluded). A stage lists the ones it offers.
FLAG_REASONS = {
    "offensive": "Offensive",
    "sexual": "Sexual content",
    "hateful": "Hateful",
    "uninterpretable": "Cannot be interpreted",
    # MemeBench section 2, quality control: "targeted manual review of VIKR layer separation,
    # checklist consistency, ambiguity, image quality, and safety" (247 of 1,500 removed).
    "layer_separation": "Layers not separated (e.g. Visual names an entity)",
    "checklist_consistency": "Checklists inconsistent with the explanation or each other",
    "ambiguity": "Ambiguous: the meme has no single explainable meaning",
    "image_quality": "Image quality too low",
    "safety": "Safety: unsafe content",
}
#: Keys of a model stage's ``model`` object: ``provider`` names the project's provider that
#: converts (empty: the project's only enabled provider), ``source`` the earlier stage whose
#: values are sent, ``prompt`` the instructions, ``checks`` the automated checks on the reply.
MODEL_KEYS = {"provider", "source", "prompt", "checks"}
MODEL_CHECKS = ("vikr",)
MAX_PROMPT = 20_000
SPLIT_NAMES = ("train", "val", "test")
MAX_STAGES = 8
MAX_ANNOTATORS = 20
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


@dataclass(frozen=True)
class StageSpec:
    index: int
    name: str
    label: str
    fields: tuple[str, ...]
    #: an int, or {"by": "split" | "metadata", "key"?: str, "values": {value: n}, "default": n}
    annotators: Any
    exclude_workers_of: tuple[int, ...] = ()
    #: Usernames of the annotators who may work the stage (MemeCap: separate pools per round);
    #: empty: every annotator of the project.
    workers: tuple[str, ...] = ()
    image: str = "original"
    show_text: bool = True
    show_title: bool = True
    show_stages: tuple[int, ...] = ()
    gold: str = "adjudicate"
    flags: tuple[str, ...] = ()
    candidates: bool = True
    prefill: str = "none"
    instructions: str = ""
    #: A model stage: {"provider", "source" (stage index), "prompt", "checks"}; None for people.
    model: dict | None = None
    #: A review stage: the index of the model stage whose fields it reviews; None otherwise.
    review: int | None = None

    def open_to(self, username: str) -> bool:
        if self.model is not None:
            return False  # run by a model: no person claims it
        return not self.workers or username in self.workers

    @property
    def varies(self) -> bool:
        return isinstance(self.annotators, dict)

    def annotators_range(self) -> tuple[int, int]:
        if not self.varies:
            return self.annotators, self.annotators
        values = [*self.annotators["values"].values(), self.annotators["default"]]
        return min(values), max(values)


@dataclass
class Workflow:
    stages: list[StageSpec]
    schema: Schema
    split_ratios: tuple[float, float, float] = (0.85, 0.05, 0.10)
    split_seed: int = 0
    _schemas: dict = field(default_factory=dict, repr=False)

    @property
    def prefills(self) -> bool:
        """Some stage's form starts from the candidates' agreement (anchoring reads differently)."""
        return any(s.prefill != "none" for s in self.stages)

    # ------------------------------------------------------------ construction

    @classmethod
    def for_project(cls, project) -> Workflow:
        ratios = tuple(project.split_ratios) if project.split_ratios else (0.85, 0.05, 0.10)
        return cls.from_data(
            project.workflow or None,
            schema=project.get_schema(),
            annotators_per_item=project.annotators_per_item,
            split_ratios=ratios,
            split_seed=project.split_seed,
        )

    @classmethod
    def from_data(
        cls,
        data: list | None,
        *,
        schema: Schema,
        annotators_per_item: int = 2,
        split_ratios=(0.85, 0.05, 0.10),
        split_seed: int = 0,
    ) -> Workflow:
        """The workflow described by ``data`` (a list of stage objects), or the one-stage default
        when ``data`` is empty. Raises SchemaError naming the stage and the rule."""
        if not data:
            stage = StageSpec(0, "annotate", "Annotate", tuple(schema.names), int(annotators_per_item))
            return cls([stage], schema, tuple(split_ratios), split_seed)
        if not isinstance(data, list) or len(data) > MAX_STAGES:
            raise SchemaError(f"a workflow is a list of 1 to {MAX_STAGES} stages")
        stages: list[StageSpec] = []
        seen_fields: dict[str, str] = {}
        names: dict[str, int] = {}
        for index, raw in enumerate(data):
            stages.append(_stage(index, raw, schema=schema, names=names, seen_fields=seen_fields))
            names[stages[-1].name] = index
        missing = [n for n in schema.names if n not in seen_fields]
        if missing:
            raise SchemaError(f"field(s) {', '.join(missing)} belong to no stage")
        if len(stages) > 1 and any(s.gold == "adjudicate" for s in stages):
            raise SchemaError(
                "a workflow of several stages keeps references or values in every stage (gold: "
                "references or value): a later stage cannot build on values nobody has adjudicated yet"
            )
        for s in stages:
            if s.model is not None and not any(r.review == s.index for r in stages):
                raise SchemaError(f"stage {s.index + 1} ({s.name}): a model stage needs a later stage that reviews it")
        return cls(stages, schema, tuple(split_ratios), split_seed)

    # ------------------------------------------------------------ questions

    @property
    def multi(self) -> bool:
        return len(self.stages) > 1

    @property
    def last(self) -> int:
        return len(self.stages) - 1

    def stage(self, index: int) -> StageSpec:
        return self.stages[min(max(int(index), 0), self.last)]

    def stage_of_field(self, name: str) -> StageSpec:
        return next(s for s in self.stages if name in s.fields)

    def reference_fields(self) -> list[str]:
        return [n for s in self.stages if s.gold == "references" and s.model is None for n in s.fields]

    def model_stages(self) -> list[StageSpec]:
        return [s for s in self.stages if s.model is not None]

    def stage_schema(self, index: int) -> Schema:
        """The part of the schema a stage's annotators fill in (visible_if and links stay inside it)."""
        if not self.multi:
            return self.schema
        if index not in self._schemas:
            wanted = set(self.stage(index).fields)
            self._schemas[index] = Schema(
                {"version": self.schema.version, "fields": [s for s in self.schema.fields if s["name"] in wanted]}
            )
        return self._schemas[index]

    def annotators_for(self, item, index: int) -> int:
        """How many annotators work ``item`` in stage ``index`` (its split or metadata decides
        when the stage says so; the split is the one pinned on the item, see split_for)."""
        spec = self.stage(index)
        if not spec.varies:
            return spec.annotators
        rule = spec.annotators
        if rule["by"] == "split":
            key = item.split or self.split_for(item)
        else:
            key = (item.metadata or {}).get(rule["key"])
        return int(rule["values"].get(str(key) if key is not None else None, rule["default"]))

    def split_for(self, item) -> str:
        """The split an item gets when a stage needs it before the release: drawn from the
        project's ratios and seed by a hash of the item's import key (stable across machines),
        pinned on the item by the caller and kept by every release."""
        digest = hashlib.blake2b(f"{self.split_seed}:{item.import_key}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / 2**64
        total = sum(self.split_ratios) or 1.0
        edge = 0.0
        for name, ratio in zip(SPLIT_NAMES, self.split_ratios):
            edge += ratio / total
            if u < edge:
                return name
        return SPLIT_NAMES[-1]

    def needs_split(self) -> bool:
        return any(s.varies and s.annotators["by"] == "split" for s in self.stages)


def _stage(index: int, raw: Any, *, schema: Schema, names: dict[str, int], seen_fields: dict[str, str]) -> StageSpec:
    if not isinstance(raw, dict):
        raise SchemaError(f"stage {index + 1} must be an object")
    name = raw.get("name")
    where = f"stage {index + 1}" + (f" ({name})" if isinstance(name, str) else "")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SchemaError(f"{where}: name must be lower-case letters, digits and _")
    if name in names:
        raise SchemaError(f"{where}: another stage has this name")
    known = {
        "name",
        "label",
        "fields",
        "annotators",
        "exclude_workers_of",
        "workers",
        "image",
        "show_text",
        "show_title",
        "show_stages",
        "gold",
        "flags",
        "candidates",
        "prefill",
        "instructions",
        "model",
        "review",
    }
    unknown = sorted(set(raw) - known)
    if unknown:
        raise SchemaError(f"{where}: unknown key(s) {', '.join(unknown)}")
    if "model" in raw and "review" in raw:
        raise SchemaError(f"{where}: a stage is run by a model or reviews one, not both")
    review = None
    if "review" in raw:
        target = raw["review"]
        if not isinstance(target, str) or target not in names:
            raise SchemaError(f"{where}: review names {target!r}, which is not an earlier stage")
        review = names[target]
        reviewed = [f for f, owner in seen_fields.items() if owner == target]
        if raw.get("fields") not in (None, reviewed):
            raise SchemaError(f"{where}: a review stage edits the fields of {target!r}: leave fields out")
        raw = {**raw, "fields": reviewed}
    fields = raw.get("fields")
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise SchemaError(f"{where}: fields must list the schema fields the stage fills in")
    for f in fields:
        if review is not None:
            continue
        if f not in schema.by_name:
            raise SchemaError(f"{where}: {f!r} is not a field of the schema")
        if f in seen_fields:
            raise SchemaError(f"{where}: {f!r} is already filled in by stage {seen_fields[f]}")
        seen_fields[f] = name
        spec = schema.by_name[f]
        for key in ("visible_if", "link_to"):
            target = spec.get(key)
            target = target.get("field") if isinstance(target, dict) else target
            if target and target not in fields:
                raise SchemaError(f"{where}: {f!r} depends on {target!r} ({key}), which must be in the same stage")
    if raw.get("show_text", True) is False:
        spans = [f for f in fields if schema.by_name[f]["type"] == "span"]
        if spans:
            raise SchemaError(f"{where}: {spans[0]!r} is selected in the item text, which this stage hides")
    annotators = _annotators(raw.get("annotators", 1), where)
    refs = {}
    for key in ("exclude_workers_of", "show_stages"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SchemaError(f"{where}: {key} must list names of earlier stages")
        for v in value:
            if v not in names:
                raise SchemaError(f"{where}: {key} names {v!r}, which is not an earlier stage")
        refs[key] = tuple(names[v] for v in value)
    workers = raw.get("workers", [])
    if (
        not isinstance(workers, list)
        or len(workers) > 10_000
        or not all(isinstance(w, str) and 0 < len(w) <= 150 for w in workers)
    ):
        raise SchemaError(f"{where}: workers must list usernames (empty: every annotator)")
    image = raw.get("image", "original")
    if image not in IMAGES:
        raise SchemaError(f"{where}: image must be one of {', '.join(IMAGES)}")
    gold = raw.get("gold", "adjudicate")
    if gold not in GOLD_MODES:
        raise SchemaError(f"{where}: gold must be one of {', '.join(GOLD_MODES)}")
    flags = raw.get("flags", [])
    if not isinstance(flags, list) or any(f not in FLAG_REASONS for f in flags):
        raise SchemaError(f"{where}: flags must be among {', '.join(FLAG_REASONS)}")
    for key in ("show_text", "show_title", "candidates"):
        if not isinstance(raw.get(key, True), bool):
            raise SchemaError(f"{where}: {key} must be true or false")
    candidates = bool(raw.get("candidates", index == 0)) and "model" not in raw and review is None
    prefill = raw.get("prefill", "none")
    if prefill not in PREFILL_MODES:
        raise SchemaError(f"{where}: prefill must be one of {', '.join(PREFILL_MODES)}")
    if prefill != "none" and not candidates:
        raise SchemaError(f"{where}: prefill '{prefill}' starts from the candidates: the stage must show candidates")
    label = raw.get("label", name.replace("_", " ").capitalize())
    instructions = raw.get("instructions", "")
    if not isinstance(label, str) or len(label) > 120 or not isinstance(instructions, str) or len(instructions) > 4000:
        raise SchemaError(f"{where}: label (<= 120 characters) and instructions (<= 4,000) must be text")
    model = _model(raw.get("model"), where, names) if "model" in raw else None
    if model is not None and index == 0:
        raise SchemaError(f"{where}: a model stage converts an earlier stage's values: it cannot be the first")
    if (model is not None or review is not None) and annotators != 1:
        raise SchemaError(f"{where}: a model stage and its review have one annotator")
    if gold == "value" and annotators != 1:
        raise SchemaError(f"{where}: gold 'value' keeps one annotator's value: annotators must be 1")
    if review is not None and gold != "value":
        raise SchemaError(f"{where}: the reviewed values become gold: gold must be 'value'")
    return StageSpec(
        index=index,
        name=name,
        label=label,
        fields=tuple(fields),
        annotators=annotators,
        exclude_workers_of=refs["exclude_workers_of"],
        workers=tuple(dict.fromkeys(workers)),
        image=image,
        show_text=raw.get("show_text", True),
        show_title=raw.get("show_title", True),
        show_stages=refs["show_stages"],
        gold=gold,
        flags=tuple(flags),
        candidates=candidates,
        prefill=prefill,
        instructions=instructions,
        model=model,
        review=review,
    )


def _model(value: Any, where: str, names: dict[str, int]) -> dict:
    if not isinstance(value, dict):
        raise SchemaError(f"{where}: model must be an object ({', '.join(sorted(MODEL_KEYS))})")
    unknown = sorted(set(value) - MODEL_KEYS)
    if unknown:
        raise SchemaError(f"{where}: unknown key(s) of model: {', '.join(unknown)}")
    provider = value.get("provider", "")
    if not isinstance(provider, str) or len(provider) > 80:
        raise SchemaError(f"{where}: model.provider is the name of one of the project's providers (or empty)")
    source = value.get("source")
    if source not in names:
        raise SchemaError(f"{where}: model.source must name an earlier stage (whose values the model converts)")
    prompt = value.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT:
        raise SchemaError(f"{where}: model.prompt is the instruction text (1 to {MAX_PROMPT:,} characters)")
    checks = value.get("checks", [])
    if not isinstance(checks, list) or any(c not in MODEL_CHECKS for c in checks):
        raise SchemaError(f"{where}: model.checks must be among {', '.join(MODEL_CHECKS)}")
    return {"provider": provider, "source": names[source], "prompt": prompt, "checks": tuple(checks)}


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ANNOTATORS:
        raise SchemaError(f"{where}: annotators must be a whole number from 1 to {MAX_ANNOTATORS}")
    return value


def _annotators(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        return _count(value, where)
    by = value.get("by")
    if by not in ("split", "metadata"):
        raise SchemaError(f"{where}: annotators by 'split' or 'metadata'")
    if by == "metadata" and not (isinstance(value.get("key"), str) and value["key"]):
        raise SchemaError(f"{where}: annotators by metadata need the metadata key")
    values = value.get("values")
    if not isinstance(values, dict) or not values:
        raise SchemaError(f"{where}: annotators.values maps each {by} value to a number")
    if by == "split" and set(values) - set(SPLIT_NAMES):
        raise SchemaError(f"{where}: annotators by split name train, val or test")
    out = {"by": by, "values": {str(k): _count(v, where) for k, v in values.items()}}
    if by == "metadata":
        out["key"] = value["key"]
    out["default"] = _count(value.get("default", min(out["values"].values())), where)
    return out
