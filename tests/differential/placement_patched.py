"""The real Placement with some of its known bugs mended, for diagnosis only.

`scripts/differential --placement-patch anchors,summaries` runs the reference
server from this module instead of `placement.wsgi.api`. A disagreement that
disappears against the mended Placement is explained by the bug mended; one
that stays is not. The mends (each as small as the bug, in Placement's own
terms; chosen by the comma list in ALLOT_PLACEMENT_PATCHES):

- `anchors`: `AllocationRequest.__eq__`/`__hash__`
  (objects/allocation_candidate.py) ignore `anchor_root_provider_uuid`, and
  `_alloc_candidates_multiple_providers()` gathers the unsuffixed group's
  requests in a set. A request made only of sharing providers can be
  anchored on several trees (the sharing providers' own, and every tree tied
  to them through an aggregate); the set keeps one of these copies, the one
  of the tree its iteration meets first, which depends on internal ids and
  Python's set order. Suffixed groups on the other trees then find no partner
  there. Mended: the anchor takes part in equality until the groups are
  merged (merged requests that differ only by their anchor are still one).
- `summaries`: `_alloc_candidates_multiple_providers()` passes the ids of
  the providers it found (sharing providers among them) to
  `_build_provider_summaries()` as if they were roots; a sharing provider
  that is not a root, of a tree not otherwise in play, gets no summary and
  the next lookup raises KeyError (500). Mended: the ids are mapped to their
  roots first.

Never used by `--ci`; the reference of every counted run is the unpatched
Placement.
"""

import os

import sqlalchemy as sa

from placement.objects import allocation_candidate as ac
from placement.objects import research_context as res_ctx

PATCHES = set(filter(None, os.environ.get(
    'ALLOT_PLACEMENT_PATCHES', '').split(',')))

if 'anchors' in PATCHES:
    def _eq(self, other):
        return (set(self.resource_requests) == set(other.resource_requests)
                and self.mappings == other.mappings
                and self.anchor_root_provider_uuid
                == other.anchor_root_provider_uuid)

    def _hash(self):
        rrs = tuple(sorted(self.resource_requests, key=hash))
        return hash((rrs, self.anchor_root_provider_uuid))

    ac.AllocationRequest.__eq__ = _eq
    ac.AllocationRequest.__hash__ = _hash

    # Once the groups are merged the anchor has done its work: merged
    # requests that differ only by it are one answer, as unpatched.
    _consolidate = ac._consolidate_allocation_requests

    def _consolidate_unanchored(areqs, rw_ctx):
        areq = _consolidate(areqs, rw_ctx)
        areq.anchor_root_provider_uuid = None
        return areq

    ac._consolidate_allocation_requests = _consolidate_unanchored

if 'summaries' in PATCHES:
    _build = ac._build_provider_summaries

    def _build_roots(context, rw_ctx, root_ids, prov_traits):
        ids = list(root_ids)
        roots = set(root_ids)
        if ids:
            tbl = res_ctx._RP_TBL
            sel = sa.select(tbl.c.root_provider_id).where(tbl.c.id.in_(ids))
            roots = set(r[0] for r in context.session.execute(sel))
            prov_traits = ac.trait_obj.get_traits_by_provider_tree(
                context, roots)
        return _build(context, rw_ctx, roots, prov_traits)

    ac._build_provider_summaries = _build_roots

from placement.wsgi.api import application  # noqa: E402,F401
