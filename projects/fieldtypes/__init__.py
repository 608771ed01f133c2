"""The schema engine: one registry of field types (SPEC section 2; CONVENTIONS "schema engine").

A project's schema is data: ``{"version": n, "fields": [spec, ...]}``. Each spec names a field
type from ``REGISTRY``; the type owns everything that depends on the kind of value, and every
caller asks the type instead of switching on its name:

- values: what "absent" is, validation of an annotator's value, a draft's shape check, the
  cross-field check of a whole record (checklist links), lenient normalization of a model's
  candidate value;
- adjudication: comparison (agree / minor / disagree with the project threshold), auto-merge;
- agreement: ``agreement`` (the family of figures and how they are reported) plus
  ``agreement_value`` and ``pair_scores`` (the batch similarity of paired values);
- display: ``display_text``; the widget: ``templates/fields/<widget>.html`` and one entry in
  ``static/fields/widgets.js``;
- exports: ``export`` and ``arrow_type`` (the Parquet column), ``roles`` (what the type is in a
  record: a stratum, the COCO region, a grounding condition, ...);
- candidates: ``prompt_value`` / ``prompt_example`` (how the value is described to a model);
- the schema editor: ``label``, ``spec_keys`` (what a spec of the type may set).

Adding a field type: one module in this package with one FieldType subclass (it is found and
registered by its ``name``), one template ``templates/fields/<widget>.html`` and one entry in
``static/fields/widgets.js``; ``projects/tests/test_registry.py`` walks the registry and names
what is missing.

Conditional rules are declared on the spec, not coded per preset:

- ``visible_if: {"field": "label", "in": ["harmful"]}``: when the condition is false the field
  must hold its absence value (Meme3W: non-harmful => null target fields and ``[]`` regions).
- ``required: true``: when visible, the field must be present (harmful => category, entity).
- ``exclusive: ["Other"]`` (multichoice): such an option cannot be combined with another
  (AHA-Memes B.1.2).
- ``source: "text"`` (span): the value must be an exact substring of the item text.
- ``link_to: "visual"`` (checklist): items may name an item id of that checklist field; a link
  to a missing id is an error (MemeBench VIKR: Identity items name the Visual item they identify).
"""

from __future__ import annotations

import importlib
import pkgutil

from projects.fieldtypes.base import (
    AGREE,
    CATEGORICAL,
    COMMON_SPEC_KEYS,
    CONTINUOUS,
    DISAGREE,
    MINOR,
    MULTILABEL,
    Agreement,
    Context,
    FieldError,
    FieldType,
    SchemaError,
)

__all__ = [
    "AGREE",
    "CATEGORICAL",
    "COMMON_SPEC_KEYS",
    "CONTINUOUS",
    "DISAGREE",
    "MINOR",
    "MULTILABEL",
    "REGISTRY",
    "Agreement",
    "Context",
    "FieldError",
    "FieldType",
    "SchemaError",
]


def _discover() -> dict[str, FieldType]:
    """One instance of every FieldType subclass defined in this package's modules, by name.

    The order is the modules' (alphabetical) order; a name defined twice is an error.
    """
    registry: dict[str, FieldType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, FieldType)
                and obj is not FieldType
                and obj.__module__ == module.__name__
            ):
                if obj.name in registry:
                    raise RuntimeError(f"field type {obj.name!r} is defined twice")
                registry[obj.name] = obj()
    return registry


#: Every field type by its name (the ``type`` of a schema field spec).
REGISTRY: dict[str, FieldType] = _discover()
