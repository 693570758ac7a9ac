"""Turn CustomResourceDefinitions into the JSON Schemas the manifest tests validate with.

    python deploy/kubernetes/schemas/crd_to_jsonschema.py CRD.yaml [CRD.yaml ...]

writes ``deploy/kubernetes/schemas/<group>/<kind>_<version>.json`` (lower case) for every
served version of each CRD: the version's ``openAPIV3Schema`` made strict the way
kubeconform's ``openapi2jsonschema.py`` does (an object that lists its properties refuses
others unless it preserves unknown fields; ``x-kubernetes-int-or-string`` becomes integer or
string; ``nullable`` admits null; descriptions dropped). CEL rules
(``x-kubernetes-validations``) are left to the API server. Where each CRD came from is in
README.md beside this file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent


def strict(schema: Any) -> Any:
    """``schema`` (an OpenAPI v3 structural schema) as a strict JSON Schema."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    # descriptions only explain (a property named "description" is a schema, kept)
    out = {
        key: strict(value)
        for key, value in schema.items()
        if not (key == "description" and isinstance(value, str))
    }
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["type"] = ["integer", "string"]
    if out.pop("nullable", False) and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
    preserve = out.get("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


def convert(crd: dict[str, Any]) -> list[Path]:
    """Write the schema of each served version of ``crd``; the paths written."""
    group = crd["spec"]["group"]
    kind = crd["spec"]["names"]["kind"].lower()
    written = []
    for version in crd["spec"]["versions"]:
        if not version.get("served", True):
            continue
        schema = strict(version["schema"]["openAPIV3Schema"])
        schema["$schema"] = "http://json-schema.org/draft-07/schema#"
        path = HERE / group / f"{kind}_{version['name']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    """Convert every CRD in the files ``argv`` names."""
    for name in argv:
        for doc in yaml.safe_load_all(Path(name).read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                for path in convert(doc):
                    print(path.relative_to(HERE))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
