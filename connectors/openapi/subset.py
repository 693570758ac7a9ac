"""A pinned subset of a document: some operations and every component they refer to.

The curated built-in connectors (``connectors/builtin/saas/``) ship such subsets of the
vendors' published documents instead of the whole (GitHub's is 3 MB, Stripe's 4 MB), so
loading them costs milliseconds; ``python -m connectors.openapi.subset`` writes one.
"""

from __future__ import annotations

import argparse
import gzip
import json
from typing import Any

from .importer import METHODS
from .loading import pointer_target


def _refs(value: Any) -> set[str]:
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                found.add(ref)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def subset(doc: dict[str, Any], operation_ids: set[str]) -> dict[str, Any]:
    """``doc`` with only the operations whose ``operationId`` is in ``operation_ids`` and
    the ``components`` they reach through ``$ref``s (transitively). Raises ``KeyError``
    naming the ids the document does not have."""
    paths: dict[str, Any] = {}
    seen: set[str] = set()
    for path, item in (doc.get("paths") or {}).items():
        kept = {
            k: v
            for k, v in item.items()
            if k not in METHODS or (isinstance(v, dict) and v.get("operationId") in operation_ids)
        }
        ops = {k: v for k, v in kept.items() if k in METHODS}
        if ops:
            paths[path] = kept
            seen |= {v["operationId"] for v in ops.values()}
    missing = operation_ids - seen
    if missing:
        raise KeyError(f"operations not in the document: {sorted(missing)}")
    components: dict[str, dict[str, Any]] = {}
    todo = _refs(paths) | _refs(doc.get("security") or [])
    done: set[str] = set()
    while todo:
        ref = todo.pop()
        if ref in done or not ref.startswith("#/components/"):
            continue
        done.add(ref)
        _, _, kind, name = ref.split("/", 3)
        target = pointer_target(doc, ref)
        components.setdefault(kind, {})[name.replace("~1", "/").replace("~0", "~")] = target
        todo |= _refs(target)
    schemes = (doc.get("components") or {}).get("securitySchemes")
    if schemes:
        components["securitySchemes"] = schemes
    out = {k: v for k, v in doc.items() if k not in ("paths", "components", "tags", "webhooks")}
    return {**out, "paths": paths, "components": components}


def main() -> None:
    """``python -m connectors.openapi.subset IN.json OUT.json.gz operationId ...``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("operation_ids", nargs="+")
    args = parser.parse_args()
    opener: Any = gzip.open if args.source.endswith(".gz") else open
    with opener(args.source, "rb") as f:
        doc = json.load(f)
    data = json.dumps(subset(doc, set(args.operation_ids)), indent=1, sort_keys=True).encode()
    with open(args.target, "wb") as out:
        out.write(gzip.compress(data, mtime=0) if args.target.endswith(".gz") else data)


if __name__ == "__main__":
    main()
