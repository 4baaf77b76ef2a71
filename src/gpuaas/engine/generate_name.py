"""``metadata.generateName``: a name made by the server, as kube-apiserver makes it.

The name is the prefix (cut to leave room, as ``names.SimpleNameGenerator`` does: at most 58
characters) followed by 5 random characters from Kubernetes' alphabet (lowercase consonants and
digits without vowels or look-alikes, ``utilrand.String``). A name already taken is tried again, a
few times, before the create is refused as kube-apiserver would (409 AlreadyExists). The random
source is the system's (the engine is not deterministic about names, as Kubernetes is not).
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from typing import Any

from gpuaas.engine.errors import AlreadyExists, Invalid

JsonDoc = dict[str, Any]

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
_RANDOM_LENGTH = 5
_MAX_PREFIX = 63 - _RANDOM_LENGTH
_TRIES = 8


def generate(prefix: str) -> str:
    return prefix[:_MAX_PREFIX] + "".join(secrets.choice(_ALPHABET) for _ in range(_RANDOM_LENGTH))


def named(doc: Any, taken: Callable[[str], bool]) -> Any:
    """``doc`` with a generated ``metadata.name`` when it has none but a ``generateName``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        return doc
    meta = doc["metadata"]
    prefix = meta.get("generateName")
    if meta.get("name") or prefix in (None, ""):
        return doc
    if not isinstance(prefix, str):
        raise Invalid("metadata.generateName: must be a string")
    out = copy.deepcopy(doc)
    for _ in range(_TRIES):
        name = generate(prefix)
        if not taken(name):
            out["metadata"]["name"] = name
            return out
    raise AlreadyExists(f"no free name with generateName {prefix!r}; try again")
