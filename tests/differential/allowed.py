"""Error-code differences from Placement that we accept on purpose.

Placement's error codes (`errors[0].code`, from microversion 1.23) are what
clients branch on, so the harness compares them like statuses. An answer
that differs from Placement's *only* by its code (same status, both in
Placement's error envelope) is not a failure when an entry below matches
it; each entry says why the difference is deliberate, and the run prints
every entry that was used, with its reason and count, so that the list is
seen and does not rot. An entry that no longer matches anything should go.

An entry is (method, path, Placement's code, allot's code, reason):
`method` is an HTTP method or '*'; `path` is a shell pattern (fnmatch) over
the path without its query, where uuids and CUSTOM_ names are written `*`
(the same shape as the mismatch kinds in the report, e.g.
'/resource_providers/*/inventories/*').
"""

import fnmatch

import normalize

# Kept empty unless a difference is deliberate: a code that is merely wrong
# is a bug to fix, not an entry.
ALLOWED = [
]


def allowed(call, rep_a, rep_b, entries=None):
    """The reason when the answers `rep_a` (Placement) and `rep_b` (allot)
    differ only by an allowed error code, else None."""
    if 'code' not in rep_a or 'code' not in rep_b:
        return None
    if rep_a['code'] == rep_b['code']:
        return None
    rest_a = {k: v for k, v in rep_a.items() if k != 'code'}
    rest_b = {k: v for k, v in rep_b.items() if k != 'code'}
    if rest_a != rest_b:
        return None
    path = normalize.shape(call.path)
    for method, pattern, code_a, code_b, reason in (
            ALLOWED if entries is None else entries):
        if (method in ('*', call.method) and fnmatch.fnmatchcase(path, pattern)
                and code_a == rep_a['code'] and code_b == rep_b['code']):
            return reason
    return None

