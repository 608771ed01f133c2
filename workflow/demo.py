"""The MemeBench (vikr) demo: eight demo memes, half of them Chinese, a replay provider that
converts explanations into VIKR checklists offline, and nothing annotated yet, so a lead runs
explanations -> LLM checklists -> QC with removals -> release on them (`make run`).

One reply names an entity in the Visual layer and one links to a Visual item that does not
exist: the automated checks flag them for the QC reviewer. Two more transcribe a caption that
names an entity, which the check flags as well: the reviewer decides whether it may stay.
"""

from __future__ import annotations

import json
from pathlib import Path

from candidates.models import Provider, ProviderKind
from candidates.providers import replay_file_path
from candidates.services import provider_create
from projects.demo import cjk_font_file, demo_meme
from projects.models import Project

CONVERTER = "vikr-converter"
REPLAY_FILE = "vikr-conversions.jsonl"

#: source id -> (item text, conversion reply). Chinese and English, as MemeBench (768 / 485).
DEMO_VIKR = {
    "demo-00": (
        "当外星人降落后第一句话是问WiFi密码",
        {
            "visual": [
                {"id": "V1", "text": "一名穿白色宇航服的人站在月面上，旁边插着旗帜"},
                {"id": "V2", "text": "图上文字：当外星人降落后第一句话是问WiFi密码"},
            ],
            "identity": [{"id": "I1", "text": "宇航服中的人被当作“佐格星人”，来自本演示的虚构星球", "link": "V1"}],
            "knowledge": [{"id": "K1", "text": "“WiFi密码”是到别人家做客时最常被问的问题"}],
            "reasoning": [{"id": "R1", "text": "把星际来访这种宏大事件和蹭网的小事并置，形成反差"}],
            "entities": [{"id": "I1", "names": ["佐格星人"], "work": "演示宇宙"}],
        },
    ),
    "demo-01": (
        "Moon explorers: we came in peace. Zorgians: we came for snacks",
        {
            "visual": [
                {"id": "V1", "text": "An astronaut in a white suit on a grey landscape"},
                {"id": "V2", "text": "Caption: 'Moon explorers: we came in peace. Zorgians: we came for snacks'"},
            ],
            "identity": [{"id": "I1", "text": "The astronaut stands for the Moon explorers", "link": "V1"}],
            "knowledge": [{"id": "K1", "text": "'We came in peace' is the stock greeting of film aliens"}],
            "reasoning": [{"id": "R1", "text": "The solemn greeting is undercut by a trivial motive (snacks)"}],
            "entities": [{"id": "I1", "names": ["Moon explorers"]}],
        },
    ),
    "demo-02": (
        "佐格星人喝咖啡用叉子",
        {
            "visual": [
                {"id": "V1", "text": "一杯放在木桌上的咖啡，杯中有拉花"},
                {"id": "V2", "text": "佐格星人的叉子放在杯旁"},  # names the entity: flagged
            ],
            "identity": [{"id": "I1", "text": "叉子的主人是佐格星人", "link": "V2"}],
            "knowledge": [{"id": "K1", "text": "咖啡通常用勺子搅拌，而不是叉子"}],
            "reasoning": [{"id": "R1", "text": "用错误的餐具嘲讽外星人不懂地球习俗"}],
            "entities": [{"id": "I1", "names": ["佐格星人"]}],
        },
    ),
    "demo-03": (
        "Monday morning coffee hits different",
        {
            "visual": [{"id": "V1", "text": "A cup of coffee with latte art"}],
            "identity": [{"id": "I1", "text": "The cup is the narrator's Monday coffee", "link": "V3"}],  # dangling
            "knowledge": [{"id": "K1", "text": "'Hits different' is internet slang for an unusually strong effect"}],
            "reasoning": [{"id": "R1", "text": "Relatable exaggeration of needing coffee at the start of the week"}],
        },
    ),
    "demo-04": (
        "蓝月教团认为猫是小祭司",
        {
            "visual": [
                {"id": "V1", "text": "一只橘色虎斑猫正面注视镜头"},
                {"id": "V2", "text": "图上文字：蓝月教团认为猫是小祭司"},
            ],
            "identity": [{"id": "I1", "text": "猫被说成“蓝月教团”的小祭司", "link": "V1"}],
            "knowledge": [{"id": "K1", "text": "网络上常说猫“高冷”，像在俯视人类"}],
            "reasoning": [
                {"id": "R1", "text": "把猫的严肃表情解读为宗教身份，制造荒诞感"},
                {"id": "R2", "text": "调侃猫主人对猫的崇拜"},
            ],
            "entities": [{"id": "I1", "names": ["蓝月教团"]}],
        },
    ),
    "demo-05": (
        "Me pretending to listen in the team meeting",
        {
            "visual": [{"id": "V1", "text": "A tabby cat staring at the camera with wide eyes"}],
            "identity": [{"id": "I1", "text": "The cat stands for the poster in a meeting", "link": "V1"}],
            "knowledge": [{"id": "K1", "text": "Long team meetings are a common office complaint"}],
            "reasoning": [{"id": "R1", "text": "The cat's blank stare mirrors feigned attention"}],
        },
    ),
    "demo-06": (
        "冰箱门一开，三个房间外都能听见",
        {
            "visual": [{"id": "V1", "text": "一只猫竖起耳朵，眼睛睁大"}],
            "identity": [{"id": "I1", "text": "猫代表贪吃的宠物", "link": "V1"}],
            "knowledge": [{"id": "K1", "text": "宠物会对冰箱开门的声音做出反应，期待食物"}],
            "reasoning": [{"id": "R1", "text": "夸张猫对食物声音的灵敏，引起养猫人的共鸣"}],
        },
    ),
    "demo-07": (
        "Glorbian monks never share their cat treats",
        {
            "visual": [{"id": "V1", "text": "A cat looking sideways with narrowed eyes"}],
            "identity": [{"id": "I1", "text": "The cat is cast as a Glorbian monk", "link": "V1"}],
            "knowledge": [{"id": "K1", "text": "Monks are stereotyped as sharing everything"}],
            "reasoning": [{"id": "R1", "text": "Incongruity between monastic generosity and a greedy cat"}],
            "entities": [{"id": "I1", "names": ["Glorbian monk"]}],
        },
    ),
}


def _chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def demo_vikr_manifest(rows: list[dict]) -> list[dict]:
    """The demo memes kept for the vikr project, with MemeBench-like texts (Chinese and English)."""
    out = []
    for row in rows:
        if row.get("source_id") in DEMO_VIKR:
            text = DEMO_VIKR[row["source_id"]][0]
            # Domain is annotated in stage 1 (gold.domain), not the importer's "demo" label.
            out.append({**row, "text": text, "language": "zh" if _chinese(text) else "en", "domain": ""})
    return out


def demo_vikr_write(folder: Path) -> None:
    """Keep only the vikr demo memes in a demo source folder (manifest.jsonl), with their texts.

    The Chinese memes are drawn again with their Chinese caption (a CJK font: fonts-wqy-microhei),
    so that the picture says what the item text and the Visual transcription say. Without a CJK
    font the English picture stays (and the demo's texts disagree with it)."""
    manifest = folder / "manifest.jsonl"
    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = demo_vikr_manifest(rows)
    font = cjk_font_file()
    for row in kept:
        if font and _chinese(row["text"]) and row.get("template"):
            image = demo_meme(row["template"], row["text"], font_file=font)
            path = folder / row["image"]
            image.save(path, format="PNG" if path.suffix == ".png" else "JPEG", quality=90)
    manifest.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")


def demo_vikr_load(*, project: Project) -> Provider:
    """The replay converter and its file of conversion replies (one per demo meme); the
    conversion stage names it. Idempotent."""
    path = replay_file_path(project.pk, REPLAY_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"source_id": sid, "reply": json.dumps(reply, ensure_ascii=False)}, ensure_ascii=False)
        for sid, (_, reply) in DEMO_VIKR.items()
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    provider = Provider.objects.filter(project=project, name=CONVERTER).first() or provider_create(
        project=project,
        name=CONVERTER,
        kind=ProviderKind.REPLAY,
        model="vikr-converter-replay",
        replay_file=REPLAY_FILE,
        requests_per_minute=6000,
        timeout_seconds=10,
    )
    workflow = [dict(s) for s in project.workflow or []]
    for stage in workflow:
        if isinstance(stage.get("model"), dict) and not stage["model"].get("provider"):
            stage["model"] = {**stage["model"], "provider": CONVERTER}
    if workflow != project.workflow:
        Project.objects.filter(pk=project.pk).update(workflow=workflow)
        project.workflow = workflow
    return provider
