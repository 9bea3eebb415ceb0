#!/usr/bin/env python3
"""Extract the playlist string constants of globocom/m3u8's tests/playlists.py into files.

Usage: python3 extract.py PATH_TO_playlists.py OUTDIR [--commit SHA]

Every module-level str whose value contains "#EXT" becomes OUTDIR/<NAME>.m3u8, written
byte for byte as the UTF-8 encoding of the Python value (nothing stripped: leading
newlines, CRLF and BOMs are kept). OUTDIR/expected.json records, for each file, what
m3u8.loads() of the installed m3u8 library makes of it. Run it with the m3u8 version
the playlists come from (pip install m3u8==<version>), e.g. in a venv.
"""
import argparse
import importlib.metadata
import importlib.util
import json
import os
import sys

MAX_BYTES = 200 * 1024


def load_module(path):
    spec = importlib.util.spec_from_file_location("m3u8_test_playlists", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summarize(m3u8, text):
    try:
        playlist = m3u8.loads(text)
    except Exception as error:  # record whatever the library raises
        return {
            "parsed": False,
            "error": f"{type(error).__name__}: {error}",
            "is_variant": None,
            "variants": None,
            "iframe_variants": None,
            "renditions": None,
            "segments": None,
            "encrypted_segments": None,
        }
    encrypted = sum(
        1
        for segment in playlist.segments
        if segment.key is not None and segment.key.method not in (None, "NONE")
    )
    return {
        "parsed": True,
        "error": None,
        "is_variant": bool(playlist.is_variant),
        "variants": len(playlist.playlists),
        "iframe_variants": len(playlist.iframe_playlists),
        "renditions": len(playlist.media),
        "segments": len(playlist.segments),
        "encrypted_segments": encrypted,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("playlists_py")
    parser.add_argument("outdir")
    parser.add_argument("--commit", default="", help="globocom/m3u8 commit the file comes from")
    args = parser.parse_args()

    import m3u8

    module = load_module(args.playlists_py)
    os.makedirs(args.outdir, exist_ok=True)
    playlists = {}
    skipped = []
    for name, value in vars(module).items():
        if name.startswith("__") or not isinstance(value, str) or "#EXT" not in value:
            continue
        data = value.encode("utf-8")
        if len(data) > MAX_BYTES:
            skipped.append((name, len(data)))
            continue
        filename = f"{name}.m3u8"
        with open(os.path.join(args.outdir, filename), "wb") as f:
            f.write(data)
        playlists[filename] = summarize(m3u8, value)

    expected = {
        "source": {
            "repository": "globocom/m3u8",
            "commit": args.commit,
            "file": "tests/playlists.py",
            "library_version": importlib.metadata.version("m3u8"),
        },
        "playlists": playlists,
    }
    with open(os.path.join(args.outdir, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, sort_keys=True, indent=1, ensure_ascii=False)
        f.write("\n")

    failed = [n for n, s in playlists.items() if not s["parsed"]]
    print(f"wrote {len(playlists)} playlists, {len(failed)} not parsed by m3u8.loads", file=sys.stderr)
    for name, size in skipped:
        print(f"skipped {name}: {size} bytes > {MAX_BYTES}", file=sys.stderr)


if __name__ == "__main__":
    main()
