"""Look at or clear the pack's content cache (``models/broadcast_cache``) from a shell; ComfyUI may keep running.

    python scripts/cache.py /path/to/ComfyUI/models/broadcast_cache                 # size, entries, cap
    python scripts/cache.py /path/to/ComfyUI/models/broadcast_cache --clear musetalk_avatars
    python scripts/cache.py /path/to/ComfyUI/models/broadcast_cache --clear-all
    python scripts/cache.py /path/to/ComfyUI/models/broadcast_cache --enforce-cap  # evict down to the cap now

Entries a running server is reading disappear from view at once and from the disk when it lets go of them. The cap
is BROADCAST_CACHE_MAX_GB (GiB; 20 by default; ``none`` for no cap), read by ComfyUI at start and here.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engines.common.cache import ContentCache, format_bytes  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the cache folder (ComfyUI's models/broadcast_cache)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--clear", metavar="NAMESPACE", help="remove every entry of one namespace")
    group.add_argument("--clear-all", action="store_true", help="remove every entry")
    group.add_argument("--enforce-cap", action="store_true", help="evict least-recently-used entries to the cap")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")
    store = ContentCache(args.folder)
    if args.clear or args.clear_all:
        spaces = {p.parent.name for _u, _s, p in store.entries()}
        if args.clear and args.clear not in spaces:
            parser.error(f"no namespace {args.clear!r}; there are: {', '.join(sorted(spaces)) or 'none'}")
        print(f"removed {store.clear(args.clear)} entries")
    elif args.enforce_cap:
        print(f"freed {format_bytes(store.enforce_cap())}")
    print(store.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
