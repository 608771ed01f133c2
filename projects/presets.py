"""Annotation presets: schemas (data, not code) and guideline texts from the seed papers.

meme3w: harmtrace-meme3w.txt Eq. 1, Appendix A.1 (taxonomy, harmfulness definition, schema)
and A.2 (the six annotation guidelines). aha: aha-memes.txt section 3.4 and Appendix B.1.
memecap: memecap.txt (literal caption, visual metaphors, meme captions). vikr:
memebench-vikr.txt (reference explanation, LLM conversion into the VIKR checklists, QC).
"""

from __future__ import annotations

from metrics.entity import TABLE8_LEXICON

MEME3W_CATEGORIES = ["group background", "religion and caste", "gender", "health condition"]

MEME3W_GUIDELINE = """\
HARMFULNESS. A meme is harmful when it directs harmful behaviour toward a clear target. Harmful
behaviour includes targeted satire, insults, mockery, degradation, stereotyping, dehumanization,
threats, exclusion, segregation, discrimination, assertions of inferiority, comparisons to animals
or objects, mockery of hate crimes or historical suffering, and gender- or sexuality-based harm.
Ordinary humour, non-targeted profanity, general criticism, and attacks on criminals, terrorists,
or criminal activities are non-harmful.

TARGET CATEGORIES (exactly one per harmful meme).
- group background: ethnicity, race, nationality, regional or ethnic origin, minority background,
  immigration or migrant status.
- religion and caste: religion, religious belief, religious identity, followers or believers of a
  religion, religious people, religious groups, and caste.
- gender: biological sex, gender identity, and sexual orientation.
- health condition: disability, disease, vaccination-related targets, infection, bodily condition,
  medical treatment, public-health measures, and health-related policy framing.

ABSENCE. Non-harmful: category, entity and mention are empty and there are no boxes. Harmful:
category and entity are always filled; the mention and the boxes only when the evidence exists.

GUIDELINES.
1. Determine harmfulness and target category. Assign the attacked target to exactly one category.
   Samples whose category cannot be determined reliably, or that independently attack several
   categories, are skipped (use "Skip" with that reason) rather than forced into one category.
2. Interpret the meme from the author's perspective, from the image-text content only: consider
   satire, metaphor, insinuation, double meanings, stereotypes, and historical, cultural or
   social context rather than only the literal wording.
3. Identify the actual attacked entity, at the right level of granularity. Perpetrators,
   symbols, background figures and contextual objects are not targets unless they are attacked.
   When the target is indirect, infer the entity from the complete meaning of the meme.
4. Copy textual mentions exactly: select the exact span of the item text that refers to the
   target, without paraphrasing, expanding or correcting it. No explicit mention: leave empty.
5. Mark complete visual target regions: each box tightly covers the complete visible extent of
   the target, not only its face. One box per visual instance of the target. Not depicted: no box.
6. Ensure accurate multimodal grounding: the mention and the boxes must correspond to the
   attacked target in their modality.

Candidates A/B/C come from anonymous models in a random order. They are editable references
only: take a whole candidate or one field, then revise anything the evidence does not support.
"""

MEME3W_SCHEMA = {
    "version": 1,
    "fields": [
        {
            "name": "label",
            "type": "choice",
            "label": "Harmfulness",
            "choices": ["harmful", "non-harmful"],
            "required": True,
        },
        {
            "name": "target_category",
            "type": "choice",
            "label": "Target category",
            "choices": MEME3W_CATEGORIES,
            "required": True,
            "visible_if": {"field": "label", "in": ["harmful"]},
        },
        {
            "name": "target_entity",
            "type": "entity",
            "label": "Target entity",
            "help": "Who is attacked, e.g. “Muslim people”.",
            "required": True,
            "visible_if": {"field": "label", "in": ["harmful"]},
        },
        {
            "name": "text_mention",
            "type": "span",
            "label": "Text mention",
            "help": "Select the exact words in the item text; empty when the text does not name the target.",
            "source": "text",
            "visible_if": {"field": "label", "in": ["harmful"]},
        },
        {
            "name": "visual_region",
            "type": "boxes",
            "label": "Visual region",
            "help": "Draw one box per depicted instance of the target; none when it is not depicted.",
            "visible_if": {"field": "label", "in": ["harmful"]},
        },
    ],
}

AHA_HATEFUL_TYPES = [
    "Mocking",
    "Incitement",
    "Dehumanization",
    "Slurs",
    "Contempt",
    "Inferiority",
    "Exclusion",
    "Other",
]
AHA_NON_HATEFUL_TYPES = ["Humor", "Sarcasm", "Other"]
AHA_PROTECTED_CATEGORIES = [
    "ethnicity",
    "race",
    "nationality",
    "immigration status",
    "religion",
    "caste",
    "sex",
    "gender identity",
    "sexual orientation",
    "disability or disease",
]

AHA_GUIDELINE = """\
HATEFUL content is a direct or indirect attack on people on the basis of a protected
characteristic: ethnicity, race, nationality, immigration status, religion, caste, sex, gender
identity, sexual orientation, and disability or disease. An attack includes violent or
dehumanizing speech, statements of inferiority, calls for exclusion or segregation, or mockery of
a hate crime. Boundary rules: attacking groups that themselves promote or carry out hate (e.g.
terrorist organisations) is not hate speech; a meme that is insulting or offensive but does not
target a protected category is Not-Hateful.

Task 1 (is_hateful): exactly one of Hateful / Not-Hateful. Hateful -> Task 2; Not-Hateful -> Task 3.
Task 2 (hateful_type, multi-label): Dehumanization (describing a group as subhuman), Inferiority
(claiming a group is inferior or less worthy), Incitement (calling for harm), Mocking (joking
about, belittling or disparaging a group), Contempt (intensely negative feelings toward a group),
Slurs (prejudicial terms for a group), Exclusion (advocating exclusion or segregation), Other (a
hateful attack that fits none of these: only when no other type applies, never combined).
Also mark the targeted protected categories (multi-label).
Task 3 (non_hateful_type, multi-label): Humor (entertainment with no negative implication toward
a protected group), Sarcasm (irony aimed at general behaviour or institutions), Other (neutral,
positive or informational content).
"""

AHA_SCHEMA = {
    "version": 1,
    "fields": [
        {
            "name": "is_hateful",
            "type": "choice",
            "label": "Hateful?",
            "choices": ["Hateful", "Not-Hateful"],
            "required": True,
        },
        {
            "name": "hateful_type",
            "type": "multichoice",
            "label": "Attack type",
            "choices": AHA_HATEFUL_TYPES,
            "exclusive": ["Other"],
            "required": True,
            "visible_if": {"field": "is_hateful", "in": ["Hateful"]},
        },
        {
            "name": "targeted_categories",
            "type": "multichoice",
            "label": "Targeted protected categories",
            "choices": AHA_PROTECTED_CATEGORIES,
            "required": True,
            "visible_if": {"field": "is_hateful", "in": ["Hateful"]},
        },
        {
            "name": "non_hateful_type",
            "type": "multichoice",
            "label": "Not-hateful subtype",
            "choices": AHA_NON_HATEFUL_TYPES,
            "required": True,
            "visible_if": {"field": "is_hateful", "in": ["Not-Hateful"]},
        },
    ],
}

MEMECAP_GUIDELINE = """\
Two rounds (MemeCap section 3.2).

Round 1, literal image caption: describe what the picture shows, literally, without
interpreting it. The text of the meme has been painted out so that it does not steer you;
ignore any that is left. One or two sentences ("Tom cat is shaking hands with two small cats
and smiling").

Round 2, meme caption and visual metaphors: you see the meme, its title and the literal
caption from round 1. First, for each element of the literal caption that is used
metaphorically, add a pair: the visual element (vehicle, e.g. "Tom cat") and what it stands
for (meaning, e.g. "the meme poster"). Then write a concise meme caption: what the poster
wanted to convey, without naming the vehicles (not "Tom").

In either round, flag a meme that is offensive, sexual, hateful or cannot be interpreted: it
leaves the dataset with your reason.
"""

MEMECAP_SCHEMA = {
    "version": 1,
    "fields": [
        {"name": "image_caption", "type": "text", "label": "Literal image caption", "required": True},
        {
            "name": "metaphors",
            "type": "pairlist",
            "label": "Visual metaphors (vehicle → meaning)",
            "parts": ["vehicle", "meaning"],
            "max_items": 8,
        },
        {"name": "meme_caption", "type": "text", "label": "Meme caption", "required": True},
    ],
}

MEMECAP_FLAGS = ["offensive", "sexual", "hateful", "uninterpretable"]
#: The two rounds of MemeCap section 3.2, as data (projects.workflow): different people write
#: the literal caption (on the text-free image) and the meme captions (seeing title, meme and
#: the literal caption); one meme caption per train item, two per test item (the paper: 2-4).
MEMECAP_WORKFLOW = [
    {
        "name": "literal",
        "label": "Literal image caption",
        "fields": ["image_caption"],
        "annotators": 1,
        "image": "textfree",
        "show_text": False,
        "show_title": False,
        "gold": "references",
        "flags": MEMECAP_FLAGS,
        "candidates": False,
        "instructions": "Describe the picture literally; its text was painted out on purpose.",
    },
    {
        "name": "meme",
        "label": "Meme caption and visual metaphors",
        "fields": ["metaphors", "meme_caption"],
        "annotators": {"by": "split", "values": {"train": 1, "val": 1, "test": 2}, "default": 1},
        "exclude_workers_of": ["literal"],
        "show_stages": ["literal"],
        "image": "original",
        "gold": "references",
        "flags": MEMECAP_FLAGS,
        "candidates": False,
        "instructions": "Pair each metaphorical element with its meaning, then say what the meme means.",
    },
]

VIKR_LANGUAGES = ["Chinese", "English"]
VIKR_DOMAINS = ["ACG", "Cross-domain", "Daily life", "Movies and TV", "Public life"]

VIKR_GUIDELINE = """\
Three stages (MemeBench section 2, "Construction").

Stage 1, reference explanation (a bilingual annotator familiar with ACG and internet meme
culture): write one explanation of the meme that covers, in this order,
- the visual content: what the picture shows, including every piece of text in it (transcribe
  it in its own language);
- entity identity: who or what each depicted character, person or object is, with the source
  work it comes from ("Kēnán" [Conan] from *Detective Conan*, not "a detective boy");
- the cultural background the meme needs: facts, community conventions, catch-phrases;
- the humour mechanism: what triggers the joke, how it works and the core message.
Then set the meme's language and domain (metadata for stratified analysis only: never scored).
Write in the meme's language or in English. The explanation is the semantic source of the
checklists: anything it leaves out cannot be asked of a model later.

Stage 2, conversion (a configured LLM, no person): the explanation and the image are converted
into four checklists of 1-4 binary requirements each -- Visual (entity-agnostic description,
OCR text, appearance of salient entities, no names), Identity (each entity and its source work,
linked by id to the Visual item that shows it), Knowledge (background facts and cultural
codes), Reasoning (humour trigger, mechanism, core message). Automated checks flag replies that
break the schema, the item counts, an Identity link, or name an Identity entity in Visual.

Stage 3, quality control (a reviewer who did not write the item's explanation): read the image,
the explanation and the checklists with the flags of the automated checks, then
- accept the checklists as they are, or
- edit them (keep each item one observable, binary requirement; Visual names nobody; every
  Identity item links to the Visual item it identifies), or
- remove the item with a reason: layer separation, checklist consistency, ambiguity, image
  quality or safety (add a note). Removed items leave the benchmark; the datasheet counts them.
"""

#: The conversion prompt of stage 2 (MemeBench section 3, the VIKR schema). The explanation
#: and the schema's field descriptions are appended to it by candidates.conversion.
VIKR_CONVERSION_PROMPT = """\
You convert a human-written reference explanation of a meme into the VIKR checklist schema.
You see the meme image and the explanation. The explanation is the only source of meaning:
do not add interpretations it does not contain; use the image only to describe what is visible
and to transcribe its text exactly.

Write four checklists. Each holds 1 to 4 binary requirements: short statements that a model's
explanation of the meme either satisfies or not. One requirement checks one thing.

- "visual" (ids V1, V2, ...): an entity-agnostic description of what is visible: the scene,
  the appearance of each salient character, person or object, and a transcription of the text
  in the image (OCR, in its original language and script). NEVER name an entity here: no
  character, person, work, brand or group names -- describe appearance instead ("a boy in a
  blue blazer with glasses", not "Conan").
- "identity" (ids I1, I2, ...): names each entity the meme depends on and its source work
  ("the boy is Edogawa Conan (江户川柯南) from Detective Conan"). Require exact identification.
  Every identity item has "link": the id of the visual item that shows that entity.
- "knowledge" (ids K1, K2, ...): the background facts and cultural codes the meme requires
  (what a catch-phrase refers to, a plot event, a community convention), not the joke itself.
- "reasoning" (ids R1, R2, ...): the humour trigger, the mechanism (irony, incongruity,
  reference, wordplay ...) and the core message the poster wants to convey.

Also list, under "entities", every name used in the identity items, so that names can be
checked: [{"id": "I1", "names": ["Edogawa Conan", "江户川柯南", "Conan"], "work": "Detective Conan"}].

Write each requirement in the language of the explanation. Answer with JSON only, no prose
and no code fence:
{"visual": [{"id": "V1", "text": "..."}],
 "identity": [{"id": "I1", "text": "...", "link": "V1"}],
 "knowledge": [{"id": "K1", "text": "..."}],
 "reasoning": [{"id": "R1", "text": "..."}],
 "entities": [{"id": "I1", "names": ["..."], "work": "..."}]}
"""

VIKR_SCHEMA = {
    "version": 1,
    "fields": [
        {
            "name": "explanation",
            "type": "text",
            "label": "Reference explanation",
            "help": "Visual content (with the text in the image), entity identity, cultural background, humour mechanism.",
            "required": True,
            "max_length": 4000,
        },
        {"name": "language", "type": "choice", "label": "Language", "choices": VIKR_LANGUAGES, "required": True},
        {"name": "domain", "type": "choice", "label": "Domain", "choices": VIKR_DOMAINS, "required": True},
        {
            "name": "visual",
            "type": "checklist",
            "label": "Visual (V)",
            "help": "Entity-agnostic: scene, appearance, text in the image; no names.",
            "id_prefix": "V",
            "min_items": 1,
            "max_items": 4,
            "required": True,
        },
        {
            "name": "identity",
            "type": "checklist",
            "label": "Identity (I)",
            "help": "Each entity and its source work, linked to the Visual item that shows it.",
            "id_prefix": "I",
            "min_items": 1,
            "max_items": 4,
            "link_to": "visual",
            "link_required": True,
            "required": True,
        },
        {
            "name": "knowledge",
            "type": "checklist",
            "label": "Knowledge (K)",
            "help": "Background facts and cultural codes the meme requires.",
            "id_prefix": "K",
            "min_items": 1,
            "max_items": 4,
            "required": True,
        },
        {
            "name": "reasoning",
            "type": "checklist",
            "label": "Reasoning (R)",
            "help": "Humour trigger, mechanism and core message.",
            "id_prefix": "R",
            "min_items": 1,
            "max_items": 4,
            "required": True,
        },
    ],
}

VIKR_QC_FLAGS = ["layer_separation", "checklist_consistency", "ambiguity", "image_quality", "safety"]
#: MemeBench's construction as data (projects.workflow): a human reference explanation, its
#: conversion by a configured LLM, and a QC review by someone who did not write it. The QC
#: reviewer is an annotator of the stage's pool (``workers``, empty: every annotator) rather
#: than the reviewer role: the stage reuses the claim queue, the item lock, drafts and the
#: flag path, and annotators never see model identities (reviewers may), which is the rule
#: the converted checklists need (they come from a model the lead chose).
VIKR_WORKFLOW = [
    {
        "name": "reference",
        "label": "Reference explanation",
        "fields": ["explanation", "language", "domain"],
        "annotators": 1,
        "gold": "value",
        "flags": ["image_quality", "safety"],
        "candidates": False,
        "instructions": "Explain the meme: visual content, who is who (and from which work), background, the joke.",
    },
    {
        "name": "conversion",
        "label": "Conversion into VIKR checklists (LLM)",
        "fields": ["visual", "identity", "knowledge", "reasoning"],
        "annotators": 1,
        "gold": "value",
        "model": {"provider": "", "source": "reference", "prompt": VIKR_CONVERSION_PROMPT, "checks": ["vikr"]},
    },
    {
        "name": "qc",
        "label": "Quality control",
        "review": "conversion",
        "annotators": 1,
        "exclude_workers_of": ["reference"],
        "show_stages": ["reference"],
        "gold": "value",
        "flags": VIKR_QC_FLAGS,
        "instructions": "Accept the checklists, edit them, or remove the item with a reason.",
    },
]

#: How a preset's benchmark is scored (metrics.evaluation), on top of each field type's own
#: figures: ``binary`` names the positive class of a binary label (its F1 and recall);
#: ``composites`` are record-level figures; ``order`` the leaderboard columns (the paper's
#: table), ``primary`` the ranking figure, ``breakdowns`` the per-group tables.
MEME3W_EVALUATION = {
    # Meme3W "Metrics", Eq. 13 and Table 1: JRA over gold-harmful items with thresholds
    # (category EM 1, entity F1_rel 0.7, mention token-F1 0.7, region enclosing IoU 0.5).
    "binary": {"label": "harmful"},
    "composites": [
        {
            "name": "jra",
            "kind": "jra",
            "title": "JRA",
            "label": "label",
            "positive": "harmful",
            "fields": [["target_category", 1.0], ["target_entity", 0.7], ["text_mention", 0.7], ["visual_region", 0.5]],
        }
    ],
    "order": [
        "label.acc",
        "label.f1",
        "jra",
        "target_category.acc",
        "target_entity.f1_rel",
        "text_mention.em",
        "text_mention.f1",
        "visual_region.iou50",
        "visual_region.iou75",
    ],
    "primary": "jra",
    "breakdowns": ["source_dataset", "language", "gold.target_category"],
}
# AHA-Memes section 5 / Table 3: binary macro-F1 (primary), accuracy, recall of Hateful; per
# multi-label field macro-F1 over its labels and micro-F1.
AHA_EVALUATION = {
    "binary": {"is_hateful": "Hateful"},
    "order": [
        "is_hateful.macro_f1",
        "is_hateful.acc",
        "is_hateful.recall",
        "is_hateful.f1",
        "hateful_type.macro_f1",
        "hateful_type.micro_f1",
        "targeted_categories.macro_f1",
        "targeted_categories.micro_f1",
        "non_hateful_type.macro_f1",
        "non_hateful_type.micro_f1",
    ],
    "primary": "is_hateful.macro_f1",
    "breakdowns": ["source_dataset", "language", "gold.is_hateful"],
}
# MemeCap section 5.1 / Table 2: BLEU-4 and ROUGE-L of the meme caption against all references.
MEMECAP_EVALUATION = {
    "order": ["meme_caption.bleu4", "meme_caption.rouge_l", "meme_caption.token_f1"],
    "primary": "meme_caption.bleu4",
    "breakdowns": ["source_dataset", "language"],
}

# MemeBench section 3 and Appendix B: two LLM judges score every checklist item (an item passes
# only when both pass it), a layer passes when all its items do, Success = all four layers
# (the evaluation app gives this plan its meaning; the shared contract of issue 15).
VIKR_EVALUATION = {
    "kind": "checklist_judges",
    "layers": [["V", "visual"], ["I", "identity"], ["K", "knowledge"], ["R", "reasoning"]],
    "judges": 2,
    "order": ["V", "I", "K", "R", "success", "success_3of4"],
    "primary": "success",
    "breakdowns": ["gold.language", "gold.domain"],
}

#: Skip reasons (Meme3W A.2 guideline 1: unclear or multi-category samples are excluded rather
#: than forced; Appendix D: annotators may skip content they find disturbing). "other" always
#: asks for a note. A project may edit its list (Project.skip_reasons).
MEME3W_SKIP_REASONS = [
    ["disturbing", "The content is disturbing to me"],
    ["unclear_category", "The target category cannot be determined reliably"],
    ["several_categories", "It attacks several categories independently"],
    ["unreadable", "The image or text cannot be read"],
    ["other", "Other reason"],
]
GENERIC_SKIP_REASONS = [
    ["disturbing", "The content is disturbing to me"],
    ["unclear", "I cannot decide reliably"],
    ["unreadable", "The image or text cannot be read"],
    ["other", "Other reason"],
]

CUSTOM_GUIDELINE = """\
# Guideline

Describe the task here: what annotators look at, the definition of every label, and the rules
for borderline cases. Markdown is supported (headings, lists, **emphasis**, links); raw HTML is not.
"""

#: The starting point of a custom project: one required choice, to be replaced in the schema editor.
CUSTOM_SCHEMA = {
    "version": 1,
    "fields": [
        {"name": "label", "type": "choice", "label": "Label", "choices": ["yes", "no"], "required": True},
    ],
}

PRESETS = {
    "meme3w": {
        "label": "Meme3W (harmfulness + target: category, entity, mention, boxes)",
        "schema": MEME3W_SCHEMA,
        "guideline": MEME3W_GUIDELINE,
        "annotators_per_item": 2,
        "skip_reasons": MEME3W_SKIP_REASONS,
        "lexicon": {"entries": TABLE8_LEXICON, "note": "Seeded from Meme3W Table 8"},
        "evaluation": MEME3W_EVALUATION,
    },
    "aha": {
        "label": "AHA-Memes (hateful + attack types, 3 annotators, majority vote)",
        "schema": AHA_SCHEMA,
        "guideline": AHA_GUIDELINE,
        "annotators_per_item": 3,
        # AHA-Memes: 2-of-3 agreement settles a field; only the rest goes to a reviewer.
        "auto_merge_rules": ["majority"],
        "skip_reasons": GENERIC_SKIP_REASONS,
        "evaluation": AHA_EVALUATION,
    },
    "memecap": {
        "label": "MemeCap (literal caption, then meme captions and metaphors)",
        "schema": MEMECAP_SCHEMA,
        "guideline": MEMECAP_GUIDELINE,
        "annotators_per_item": 1,
        "workflow": MEMECAP_WORKFLOW,
        # Round 1 looks at the text-free variant, painted from the OCR boxes at import.
        "ocr_on_import": True,
        "evaluation": MEMECAP_EVALUATION,
        "skip_reasons": GENERIC_SKIP_REASONS,
    },
    "vikr": {
        "label": "MemeBench VIKR (reference explanation, LLM conversion into checklists, QC)",
        "schema": VIKR_SCHEMA,
        "guideline": VIKR_GUIDELINE,
        "annotators_per_item": 1,
        "workflow": VIKR_WORKFLOW,
        "evaluation": VIKR_EVALUATION,
        "skip_reasons": GENERIC_SKIP_REASONS,
    },
    "custom": {
        "label": "Custom (start from one field and build your own schema)",
        "schema": CUSTOM_SCHEMA,
        "guideline": CUSTOM_GUIDELINE,
        "annotators_per_item": 2,
        "skip_reasons": GENERIC_SKIP_REASONS,
    },
}
