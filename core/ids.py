"""Document ids every route reaches: the one rule every writer (indexer, term documents) applies.

It sits on the ground floor because every package that writes documents must refuse the same ids;
the service's ``GET /images/{id}/...`` routes are the reason, and a service test keeps the route
table and ``RESERVED_ID_SUFFIXES`` equal.
"""

from __future__ import annotations

# The sub-resources of ``GET /images/{id}`` (``vsparta.service.routes``; a service test keeps the
# two lists equal). Ids may hold "/", so an id ending in one of these would be routed to that
# sub-resource of a shorter id: the indexer refuses such ids instead of storing an unreachable one.
RESERVED_ID_SUFFIXES = ("/file", "/similar", "/thumbnail")


def routable_id(doc_id: str, where: str = "") -> str:
    """``doc_id`` if every service route reaches it; else ``ValueError`` saying why (after ``where``)."""
    for suffix in RESERVED_ID_SUFFIXES:
        if doc_id.endswith(suffix):
            shorter = doc_id[: -len(suffix)]
            raise ValueError(
                f"{where + ': ' if where else ''}id {doc_id!r} ends in {suffix!r}: the service's "
                f"GET /images/{{id}}{suffix} would take it for that route of the id {shorter!r}; "
                f"give it another id (no id may end in {', '.join(RESERVED_ID_SUFFIXES)})"
            )
    return doc_id
