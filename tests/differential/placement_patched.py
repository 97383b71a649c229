"""The real Placement with some of its known bugs mended: the evidence behind
the entries of allowed.py.

When allot and the stock Placement differ, the differential test replays the
world on a second Placement served from this module and asks again with the
mend that an allowed.py entry names; the difference passes only if allot's
answer equals the mended Placement's. `scripts/differential
--placement-patch anchors,summaries` also runs the reference itself from this
module, for diagnosis. Each mend is as small as the bug, in Placement's own
terms:

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
- `amounts`: `RequestWideSearchContext.copy_arr_if_needed()`
  (objects/research_context.py) copies a group's `AllocationRequestResource`
  only under `group_policy=none`, and `_consolidate_allocation_requests()`
  adds the amounts of later groups into it in place, so with a class asked
  for by several groups one candidate's sum leaks into another's. Mended: the
  copy is made whatever the policy.
- `consumers`: `PUT /allocations/{uuid}` and `POST /allocations`
  (handlers/allocation.py) create a new consumer's record in
  `ensure_consumer()` and delete it again only when the final write fails; a
  400 raised in between (a provider that does not exist, from
  `_resource_providers_by_uuid()`, or a bad class from `_new_allocations()`)
  leaves it behind at generation 0. Mended: those two steps delete the
  consumers this request created before the error goes out.

Which mends are on: the comma list in the request header
`X-Allot-Placement-Patches` when the request has one (the differential test's
evidence server picks a mend per request), else the one in the environment
variable ALLOT_PLACEMENT_PATCHES. gunicorn runs one synchronous worker, so
one request at a time sees the module-wide choice.
"""

import os

import sqlalchemy as sa

from placement.handlers import allocation as alloc_handler
from placement.handlers import util as data_util
from placement.objects import allocation_candidate as ac
from placement.objects import research_context as res_ctx
from placement.wsgi.api import application as _stock_application

MENDS = ('anchors', 'summaries', 'amounts', 'consumers')
DEFAULT = frozenset(filter(None, os.environ.get(
    'ALLOT_PLACEMENT_PATCHES', '').split(',')))
HEADER = 'HTTP_X_ALLOT_PLACEMENT_PATCHES'

# The mends of the request being served, and the consumers it created.
active = set(DEFAULT)
created_consumers = []


def application(environ, start_response):
    chosen = environ.get(HEADER)
    active.clear()
    active.update(DEFAULT if chosen is None
                  else filter(None, chosen.split(',')))
    unknown = active - set(MENDS)
    if unknown:
        raise ValueError('unknown Placement mend(s): %s' % sorted(unknown))
    del created_consumers[:]
    return _stock_application(environ, start_response)


# -- anchors ---------------------------------------------------------------

_stock_eq = ac.AllocationRequest.__eq__
_stock_hash = ac.AllocationRequest.__hash__


def _eq(self, other):
    if 'anchors' not in active:
        return _stock_eq(self, other)
    return (_stock_eq(self, other)
            and self.anchor_root_provider_uuid
            == other.anchor_root_provider_uuid)


def _hash(self):
    if 'anchors' not in active:
        return _stock_hash(self)
    return hash((_stock_hash(self), self.anchor_root_provider_uuid))


ac.AllocationRequest.__eq__ = _eq
ac.AllocationRequest.__hash__ = _hash

_stock_consolidate = ac._consolidate_allocation_requests


def _consolidate(areqs, rw_ctx):
    areq = _stock_consolidate(areqs, rw_ctx)
    if 'anchors' in active:
        # Once the groups are merged the anchor has done its work: merged
        # requests that differ only by it are one answer, as unmended.
        areq.anchor_root_provider_uuid = None
    return areq


ac._consolidate_allocation_requests = _consolidate

# -- summaries -------------------------------------------------------------

_stock_build = ac._build_provider_summaries


def _build_roots(context, rw_ctx, root_ids, prov_traits):
    ids = list(root_ids)
    if 'summaries' not in active or not ids:
        return _stock_build(context, rw_ctx, root_ids, prov_traits)
    tbl = res_ctx._RP_TBL
    sel = sa.select(tbl.c.root_provider_id).where(tbl.c.id.in_(ids))
    roots = set(r[0] for r in context.session.execute(sel))
    prov_traits = ac.trait_obj.get_traits_by_provider_tree(context, roots)
    return _stock_build(context, rw_ctx, roots, prov_traits)


ac._build_provider_summaries = _build_roots

# -- amounts ---------------------------------------------------------------

_stock_copy = res_ctx.RequestWideSearchContext.copy_arr_if_needed


def _copy_always(self, arr):
    if 'amounts' in active and arr.resource_class in self.multi_group_rcs:
        return ac.copy.copy(arr)
    return _stock_copy(self, arr)


res_ctx.RequestWideSearchContext.copy_arr_if_needed = _copy_always

# -- consumers -------------------------------------------------------------

_stock_ensure = data_util.ensure_consumer


def _ensure_recorded(*args, **kwargs):
    consumer, created, attrs = _stock_ensure(*args, **kwargs)
    if created:
        created_consumers.append(consumer)
    return consumer, created, attrs


data_util.ensure_consumer = _ensure_recorded


def _cleaning(step):
    """`step`, deleting this request's new consumers when it raises."""
    def run(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except Exception:
            if 'consumers' in active:
                alloc_handler.delete_consumers(created_consumers)
            raise
    return run


alloc_handler._resource_providers_by_uuid = _cleaning(
    alloc_handler._resource_providers_by_uuid)
alloc_handler._new_allocations = _cleaning(alloc_handler._new_allocations)
