"""PostgreSQL URLs as gpuaas takes them: the schemes, and the ``schema=NAME`` query parameter.

``schema=`` is not a libpq parameter: it is removed before connecting, and names the schema the
tables go in. Both the object store and the usage store read it; adapters must not import each
other, so the parsing lives here, outside both. Pure string work: no connection is made.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def is_postgres_url(url: str) -> bool:
    return url.startswith(POSTGRES_SCHEMES)


def split_schema(url: str) -> tuple[str, str | None]:
    """Remove ``schema=`` from the URL's query; return the libpq URL and the schema."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def is_plain_identifier(name: str) -> bool:
    """A name safe to splice into SQL unquoted (PostgreSQL's 63-byte limit included)."""
    return _IDENT.match(name) is not None
