"""roce-emu's signature in the images it draws (``plot``'s figures, ``topo --draw``): written into
the file's metadata by image_metadata and read back by is_roce_emu_image, so that ``--overwrite``
replaces an image only if roce-emu drew it (results/destination.py). Below every layer: the
fabric's drawing and the results' figures both sign with it."""

import os
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

#: the name an image roce-emu draws is signed with (PNG Software, PDF and SVG Creator)
CREATOR = "roce-emu"


def image_metadata(path: Path) -> dict:
    """What to pass as matplotlib's ``savefig(..., metadata=)`` for an image at ``path``: signed
    as roce-emu's, so that is_roce_emu_image knows it again, and without a creation date, so
    that the same drawing gives the same bytes."""
    ext = Path(path).suffix.lower()
    if ext == ".png":
        return {"Software": CREATOR}
    if ext == ".pdf":
        return {"Creator": CREATOR, "CreationDate": None}
    if ext == ".svg":
        return {"Creator": CREATOR, "Date": None}
    return {}


def is_roce_emu_image(path: Path) -> bool:
    """The image carries the signature image_metadata writes: a PNG text chunk ``Software``, a
    PDF Info ``/Creator``, or an SVG ``<metadata>`` creator, equal to "roce-emu"."""
    ext = Path(path).suffix.lower()
    try:
        if ext == ".png":
            return _png_text(Path(path)).get("Software") == CREATOR
        if ext == ".pdf":
            return f"/Creator ({CREATOR})".encode() in Path(path).read_bytes()
        if ext == ".svg":
            return _svg_creator(Path(path)) == CREATOR
    except (OSError, ValueError, ET.ParseError, struct.error):
        return False
    return False


def _png_text(path: Path) -> dict[str, str]:
    """The uncompressed text chunks (tEXt, iTXt) of a PNG file, read up to its image data."""
    texts: dict[str, str] = {}
    with open(path, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            raise ValueError("not a PNG file")
        while True:
            head = f.read(8)
            if len(head) < 8:
                return texts
            length, kind = struct.unpack(">I4s", head)
            if kind in (b"IDAT", b"IEND"):
                return texts
            data = f.read(length)
            f.seek(4, os.SEEK_CUR)  # the chunk's CRC
            if kind == b"tEXt":
                key, _, value = data.partition(b"\0")
                texts[key.decode("latin-1")] = value.decode("latin-1")
            elif kind == b"iTXt":
                key, _, rest = data.partition(b"\0")
                if rest[:1] == b"\0":  # not compressed: flag, method, language, translated keyword
                    value = rest[2:].split(b"\0", 2)[-1]
                    texts[key.decode("latin-1")] = value.decode("utf-8", "replace")


def _svg_creator(path: Path) -> str | None:
    """The creator an SVG file's ``<metadata>`` names (Dublin Core, as matplotlib writes it)."""
    dc = "{http://purl.org/dc/elements/1.1/}"
    root = ET.parse(path).getroot()
    for metadata in root.iter("{http://www.w3.org/2000/svg}metadata"):
        for creator in metadata.iter(f"{dc}creator"):
            for title in creator.iter(f"{dc}title"):
                return title.text
    return None
