"""Copy jars with their classes moved to another package prefix (what Maven's shade plugin
calls relocation), for a runtime jar that expects a dependency relocated under its own name.

    python scripts/relocate_jar.py OUT.jar FROM TO IN.jar [IN.jar ...]
    e.g.  ... iceberg-jackson.jar com/fasterxml/jackson org/apache/iceberg/shaded/com/fasterxml/jackson \
              jackson-core.jar jackson-databind.jar jackson-annotations.jar

Every class file's constant-pool strings (class names, descriptors, signatures, string
constants in both the slash and the dot form) and every entry name under FROM are
rewritten; module-info and versioned (META-INF/versions) classes are left out, so the
base classes serve every Java version."""

from __future__ import annotations

import struct
import sys
import zipfile

# Constant-pool entry sizes after the tag, for the tags whose entries are not Utf8 (1).
_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}


def relocate_class(data: bytes, old: bytes, new: bytes) -> bytes:
    """The class file with `old` replaced by `new` in every Utf8 constant (slash and dot forms)."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    dotted_old, dotted_new = old.replace(b"/", b"."), new.replace(b"/", b".")
    count = struct.unpack_from(">H", data, 8)[0]
    out, at, i = [data[:10]], 10, 1
    while i < count:
        tag = data[at]
        if tag == 1:
            length = struct.unpack_from(">H", data, at + 1)[0]
            text = data[at + 3:at + 3 + length].replace(old, new).replace(dotted_old, dotted_new)
            out.append(bytes([1]) + struct.pack(">H", len(text)) + text)
            at += 3 + length
        else:
            size = _SIZES[tag]
            out.append(data[at:at + 1 + size])
            at += 1 + size
            if tag in (5, 6):  # longs and doubles take two slots
                i += 1
        i += 1
    out.append(data[at:])
    return b"".join(out)


def relocate(out_path: str, old: str, new: str, jars: list[str]) -> int:
    moved = 0
    with zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: neardup-spark relocate_jar.py\n")
        seen = set()
        for jar in jars:
            with zipfile.ZipFile(jar) as src:
                for info in src.infolist():
                    name = info.filename
                    if not name.startswith(old + "/") or info.is_dir():
                        continue
                    target = new + name[len(old):]
                    if target in seen:
                        continue
                    seen.add(target)
                    data = src.read(name)
                    if name.endswith(".class"):
                        data = relocate_class(data, old.encode(), new.encode())
                        moved += 1
                    out.writestr(target, data)
    return moved


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    n = relocate(sys.argv[1], sys.argv[2].strip("/"), sys.argv[3].strip("/"), sys.argv[4:])
    print(f"relocated {n} classes into {sys.argv[1]}", file=sys.stderr)
