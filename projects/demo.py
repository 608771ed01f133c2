"""The demo: ~40 meme-like images made from scikit-image's bundled photographs.

Captions and targets are fictional and inoffensive ("people from Planet Zorg"). The set holds
near-duplicate variants (recompressed, resized, slightly cropped), one template reused with
different captions (distinct samples), and one exact pixel duplicate, so that every part of the
pipeline has something to show.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

DEMO_PASSWORD_SUFFIX = "-demo-pass"
DEMO_USERS = {
    "lead": ["lead"],
    "annotator1": ["annotator"],
    "annotator2": ["annotator"],
    "annotator3": ["annotator"],
    "reviewer": ["reviewer"],
    "auditor": ["auditor"],
    "researcher": ["researcher"],
}

# (photo, caption, harmful target info for the fictional story; used only to write captions)
MEMES = [
    ("astronaut", "When the people from Planet Zorg land and immediately ask for the wifi password"),
    ("astronaut", "Moon explorers: we came in peace. Zorgians: we came for snacks"),
    ("coffee", "Zorgians cannot be trusted with coffee, they drink it with a fork"),
    ("coffee", "Monday morning coffee hits different"),
    ("chelsea", "Followers of the Blue Moon Order think cats are tiny priests"),
    ("chelsea", "Me pretending to listen in the team meeting"),
    ("chelsea", "When you hear the fridge open from three rooms away"),
    ("chelsea", "Glorbian monks never share their cat treats"),
    ("rocket", "Zorgian engineers built this and forgot the steering wheel"),
    ("rocket", "Launching into the weekend like"),
    ("hubble_deep_field", "Somewhere out there a Zorgian is also late for work"),
    ("hubble_deep_field", "People with space hiccups should stay in their own galaxy"),
    ("immunohistochemistry", "Blue Moon Order bakers call this a pizza"),
    ("immunohistochemistry", "My homework after the dog got to it"),
    ("retina", "Zorgian eye doctors only see in one direction"),
    ("retina", "Staring at the oven waiting for the cookies"),
    ("camera", "Glorbian photographers never remove the lens cap"),
    ("camera", "Old school camera, new school problems"),
    ("moon", "The Moon: home of the Blue Moon Order, who think craters are pancakes"),
    ("moon", "Moon looking extra round tonight"),
    ("horse", "Zorgians ride horses backwards and call it progress"),
    ("horse", "Horse with no name, but with a lot of opinions"),
    ("clock", "People with space hiccups always arrive an hour late"),
    ("clock", "It is always five minutes to the weekend"),
    ("coins", "Glorbian monks count coins all day instead of praying"),
    ("coins", "My savings account after one pizza"),
    ("grass", "Touch grass, they said. Zorgians tried to eat it"),
    ("brick", "Another brick in the wall of my to-do list"),
    ("gravel", "Zorgian chefs serve gravel and call it granola"),
    ("page", "When the instructions are written by a Zorgian"),
]
# Near-duplicate variants of these indices (same meme, recompressed / resized / cropped).
VARIANTS = {0: "recompressed", 2: "resized", 8: "cropped", 11: "recompressed", 20: "resized"}
EXACT_DUPLICATE_OF = 3  # saved again as PNG: same decoded pixels, different file

ENTITY_HINTS = {
    "Zorg": ("group background", "people from Planet Zorg"),
    "Zorgian": ("group background", "Zorgians"),
    "Blue Moon Order": ("religion and caste", "followers of the Blue Moon Order"),
    "Glorbian monks": ("religion and caste", "Glorbian monks"),
    "space hiccups": ("health condition", "people with space hiccups"),
}


def _photo(name: str) -> Image.Image:
    from skimage import data

    arr = getattr(data, name)()
    if arr.ndim == 2:
        arr = np.stack([arr] * 3, axis=-1)
    if arr.dtype != np.uint8:
        arr = (255 * (arr.astype(float) / max(arr.max(), 1))).astype(np.uint8)
    img = Image.fromarray(arr[..., :3])
    img.thumbnail((640, 640))
    return img


#: TrueType fonts with Han glyphs (Debian fonts-wqy-microhei, fonts-noto-cjk), for Chinese captions.
CJK_FONT_FILES = [
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
]


def cjk_font_file() -> str | None:
    """The first installed CJK font of CJK_FONT_FILES, else None."""
    return next((f for f in CJK_FONT_FILES if Path(f).is_file()), None)


def demo_meme(photo: str, caption: str, *, font_file: str | None = None) -> Image.Image:
    """A demo meme: the photo with the caption drawn on top (a TrueType font for non-Latin text)."""
    return _caption(_photo(photo), caption, font_file=font_file)


def _caption(img: Image.Image, text: str, *, font_file: str | None = None) -> Image.Image:
    img = img.copy()
    draw = ImageDraw.Draw(img)
    size = max(14, img.width // 22)
    font = ImageFont.truetype(font_file, size) if font_file else ImageFont.load_default(size=size)
    # Chinese has no spaces between words: wrap it character by character.
    spaced = " " in text.strip()
    words, lines, line = (text.split() if spaced else list(text.strip())), [], ""
    for w in words:
        trial = f"{line} {w}".strip() if spaced else line + w
        if draw.textlength(trial, font=font) > img.width - 20 and line:
            lines.append(line)
            line = w
        else:
            line = trial
    lines.append(line)
    y = 8
    for ln in lines:
        x = (img.width - draw.textlength(ln, font=font)) / 2
        draw.text((x, y), ln, font=font, fill="white", stroke_width=max(1, size // 8), stroke_fill="black")
        y += size + 4
    return img


def _jpeg(img: Image.Image, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def demo_truth(caption: str) -> dict:
    """A plausible annotation of a demo caption (for replay candidates and simulated users)."""
    for key, (category, entity) in ENTITY_HINTS.items():
        if key in caption and not caption.startswith(("Somewhere", "Moon looking")):
            mention = key if key in caption else None
            return {
                "label": "harmful",
                "target_category": category,
                "target_entity": entity,
                "text_mention": mention,
                "visual_region": [],
            }
    return {
        "label": "non-harmful",
        "target_category": None,
        "target_entity": None,
        "text_mention": None,
        "visual_region": [],
    }


def write_demo_source(folder: Path, *, limit: int | None = None) -> Path:
    """Write images + manifest.jsonl into ``folder`` and return the manifest path.

    ``limit`` keeps only the first memes (no variants beyond them): a smaller project.
    """
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    photos: dict[str, Image.Image] = {}
    for i, (photo, caption) in enumerate(MEMES[:limit]):
        base = photos.setdefault(photo, _photo(photo))
        meme = _caption(base, caption)
        name = f"meme_{i:02d}.png" if i == EXACT_DUPLICATE_OF else f"meme_{i:02d}.jpg"
        (folder / name).write_bytes(_png(meme) if name.endswith(".png") else _jpeg(meme))
        rows.append(
            {
                "image": name,
                "text": caption,
                "source_dataset": "concord-demo",
                "source_id": f"demo-{i:02d}",
                "language": "en",
                "domain": "demo",
                "redistributable": i % 4 != 0,
                "title": f"Demo meme {i}",
                "template": photo,
            }
        )
        if i in VARIANTS:
            kind = VARIANTS[i]
            if kind == "recompressed":
                data = _jpeg(meme, quality=35)
            elif kind == "resized":
                data = _jpeg(meme.resize((int(meme.width * 0.8), int(meme.height * 0.8))))
            else:
                dx, dy = max(2, meme.width // 100), max(2, meme.height // 100)
                data = _jpeg(meme.crop((dx, dy, meme.width - dx, meme.height - dy)))
            vname = f"meme_{i:02d}_{kind}.jpg"
            (folder / vname).write_bytes(data)
            rows.append(
                {
                    "image": vname,
                    "text": caption,
                    "source_dataset": "concord-demo-mirror",
                    "source_id": f"demo-{i:02d}-{kind}",
                    "language": "en",
                    "domain": "demo",
                    "redistributable": False,
                    "title": f"Demo meme {i} ({kind} copy)",
                    "template": photo,
                }
            )
    if limit is not None:
        return _write_manifest(folder, rows)
    dup = MEMES[EXACT_DUPLICATE_OF]
    (folder / "meme_exact_copy.png").write_bytes((folder / f"meme_{EXACT_DUPLICATE_OF:02d}.png").read_bytes())
    rows.append(
        {
            "image": "meme_exact_copy.png",
            "text": dup[1] + " (reposted)",
            "source_dataset": "concord-demo-mirror",
            "source_id": "demo-exact-copy",
            "language": "en",
            "domain": "demo",
            "redistributable": True,
            "title": "Exact re-post",
            "template": dup[0],
        }
    )
    return _write_manifest(folder, rows)


def _write_manifest(folder: Path, rows: list[dict]) -> Path:
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest
