"""Fuzz: generated bodies thrown at every kind's create, replace and merge-patch (issue 17).

Whatever the body (random JSON or YAML, a valid object with one field swapped for something
hostile: NaN, infinities, huge numbers, non-string keys, deep nesting, odd Unicode), the answer is
never a 500 or a traceback, a refusal is a ``v1 Status``, and a refused write changes nothing: the
server's resourceVersion stays where it was and every list still answers 200 with valid JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from served import serve

from gpuaas.server import Server, ServerOptions, build
from gpuaas.vocab.kinds import BY_KIND, KINDS, Kind

SEED = Path(__file__).parents[1] / "cli_client" / "seed"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["\u0663", "\uff11Gi", "0.5", "1e400", "-1", "NaN", "bad key!", "", "\ud800"]),
)
keys = st.one_of(st.text(max_size=8), st.sampled_from(["spec", "metadata", "name", "podSets"]))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=20,
)


def _collection(kind: Kind) -> str:
    base = kind.base_path()
    return f"{base}/namespaces/team-a/{kind.plural}" if kind.namespaced else f"{base}/{kind.plural}"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, httpx.Client]]:
    data = tmp_path_factory.mktemp("fuzz") / "data"
    srv = build(ServerOptions(data, runtime="none"), say=lambda _: None)
    c, web = serve(srv)
    for doc in yaml.safe_load_all((SEED / "setup.yaml").read_text()):
        if doc:
            assert c.post(_collection_for(BY_KIND[doc["kind"]], doc), json=doc).status_code == 201
    try:
        yield srv, c
    finally:
        c.close()
        web.should_exit = True
        srv.close()


def _collection_for(kind: Kind, doc: dict[str, Any]) -> str:
    base = kind.base_path()
    ns = doc["metadata"].get("namespace")
    return f"{base}/namespaces/{ns}/{kind.plural}" if kind.namespaced else f"{base}/{kind.plural}"


def _encode(body: Any, as_yaml: bool) -> tuple[bytes, str]:
    if as_yaml:
        try:
            return yaml.safe_dump(body).encode("utf-8", "surrogatepass"), "application/yaml"
        except (yaml.YAMLError, UnicodeError):
            pass
    text = json.dumps(body, allow_nan=True)  # NaN and Infinity as bare tokens, as a probe sends
    return text.encode(), "application/json"


def _assert_sound(srv: Server, c: httpx.Client, rv_before: int, r: Any, what: str) -> None:
    assert r.status_code < 500, (what, r.status_code, r.text)
    if r.status_code >= 400:
        assert r.json()["kind"] == "Status", (what, r.text)
        assert "Traceback" not in r.text
        assert srv.engine.rv == rv_before, f"{what}: a refused write changed the state"


WORKLOAD = yaml.safe_load((SEED / "team-b-job.yaml").read_text())


def _swap(doc: Any, path: list[Any], value: Any) -> Any:
    """``doc`` with the value at ``path`` (as far as it exists) replaced by ``value``."""
    doc = json.loads(json.dumps(doc))
    node = doc
    for key in path[:-1]:
        found = (isinstance(node, dict) and key in node) or (
            isinstance(node, list) and isinstance(key, int) and key < len(node)
        )
        if not found:
            break
        node = node[key]
    last = path[-1]
    if isinstance(node, dict):
        node[last if isinstance(last, str) else str(last)] = value
    elif isinstance(node, list) and node:
        node[0] = value
    return doc


PATHS = [
    ["metadata", "name"],
    ["metadata", "labels", "bad key!"],
    ["metadata", "annotations", "a"],
    ["spec", "parallelism"],
    ["spec", "template", "spec", "containers", 0, "resources", "requests", "cpu"],
    ["spec", "template", "spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"],
    ["spec", "template", "spec", "containers"],
    ["spec", "template", "metadata"],
    ["spec", "x"],
]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    kind=st.sampled_from(KINDS),
    body=values,
    as_yaml=st.booleans(),
    verb=st.sampled_from(["POST", "PUT", "PATCH"]),
)
def test_random_bodies_at_every_kind(
    client: tuple[Server, httpx.Client], kind: Kind, body: Any, as_yaml: bool, verb: str
) -> None:
    srv, c = client
    raw, ctype = _encode(body, as_yaml)
    url = _collection(kind) + ("" if verb == "POST" else "/team-a-cq")
    if verb == "PATCH":
        ctype = "application/merge-patch+json" if ctype.endswith("json") else ctype
    rv = srv.engine.rv
    r = c.request(verb, url, content=raw, headers={"content-type": ctype})
    if r.status_code < 400:  # a random body may be a valid object: keep the state as it was
        return
    _assert_sound(srv, c, rv, r, f"{verb} {url} {raw[:200]!r}")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(PATHS), value=values, as_yaml=st.booleans())
def test_a_valid_job_with_one_hostile_field(
    client: tuple[Server, httpx.Client], path: list[Any], value: Any, as_yaml: bool
) -> None:
    srv, c = client
    doc = _swap(WORKLOAD, path, value)
    doc["metadata"]["name"] = "fuzz-job" if path != ["metadata", "name"] else value
    raw, ctype = _encode(doc, as_yaml)
    rv = srv.engine.rv
    r = c.post(
        "/apis/batch/v1/namespaces/team-b/jobs", content=raw, headers={"content-type": ctype}
    )
    if r.status_code == 201:  # a hostile value may be valid (a name, say): delete what was made
        made = r.json()["metadata"]["name"]
        assert c.delete(f"/apis/batch/v1/namespaces/team-b/jobs/{made}").status_code == 200
    else:
        _assert_sound(srv, c, rv, r, f"{path}={value!r}")
    for kind in KINDS:
        listed = c.get(_collection(kind))
        assert listed.status_code in (200, 404, 405), (kind.kind, listed.text)
        if listed.status_code == 200:
            json.loads(listed.text, parse_constant=lambda name: pytest.fail(name))
