"""The differences from Placement that the differential test lets pass, each
with its evidence.

A difference between the stock Placement 16.0 and allot passes only through
an entry below, and only when the entry's evidence holds for that very
answer; the query's shape never excuses anything. An entry names:

- `request`: the request class, (methods, path shape, Placement's status,
  allot's status), a status or a tuple of them; the path shape is an fnmatch pattern over the path
  without its query, uuids and CUSTOM_ names written `*` (as in the report's
  mismatch kinds);
- `world` and `query`: the minimal world and the request that shows the
  difference (`python3 tests/differential/allowed.py` builds each on a fresh
  stock Placement, a fresh mended one and a fresh allot, and checks that the
  stock answer differs from allot's and the mended one equals it);
- `evidence`, how one difference of the run is checked:
  - ('mended', MEND): the world so far is replayed on a second Placement with
    MEND of placement_patched.py (a known bug mended, nothing else) and asked
    again; allot's answer must equal that Placement's, normal form for
    normal form;
  - ('order',): the world so far is replayed on a second, stock Placement
    with its providers created in other orders (parents first, every call
    answered with the same status as before); allot's answer must equal
    Placement's answer under one of those orders: an answer Placement itself
    gives for the same world, depending on internal ids no client can see.

The run prints every entry it used, with its count. An entry whose evidence
cannot be given is not an entry: a difference that is merely allot's bug is
fixed, not listed.
"""

import argparse
import collections
import fnmatch
import os
import shutil
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True

import normalize  # noqa: E402
from world import GEN, SHARES, Call  # noqa: E402

Allowance = collections.namedtuple(
    'Allowance', 'name request evidence world query reason')

AGG = '11111111-1111-4111-8111-111111111111'
CONSUMER = '22222222-2222-4222-8222-222222222222'
PROJECT = '33333333-3333-4333-8333-333333333333'
NOWHERE = '44444444-4444-4444-8444-444444444444'


def uuid_of(name):
    """A fixed uuid per provider name of the minimal worlds."""
    return '%08x-0000-4000-8000-%012x' % (sum(map(ord, name)), len(name))


def provider(name, parent=None, inventories=None, aggregates=(),
             sharing=False):
    """The calls that make one provider of a minimal world."""
    u = uuid_of(name)
    base = '/resource_providers/' + u
    body = {'name': name, 'uuid': u}
    if parent:
        body['parent_provider_uuid'] = uuid_of(parent)
    calls = [Call('POST', '/resource_providers', body, '1.14')]
    if inventories:
        calls.append(Call('PUT', base + '/inventories', {
            'resource_provider_generation': GEN + u,
            'inventories': {rc: {'total': n}
                            for rc, n in inventories.items()}}, '1.14'))
    if aggregates:
        calls.append(Call('PUT', base + '/aggregates', {
            'resource_provider_generation': GEN + u,
            'aggregates': list(aggregates)}, '1.19'))
    if sharing:
        calls.append(Call('PUT', base + '/traits', {
            'resource_provider_generation': GEN + u,
            'traits': [SHARES]}, '1.6'))
    return calls


def claim(consumer, allocations, version='1.28'):
    return Call('PUT', '/allocations/' + consumer, {
        'allocations': {rp: {'resources': res}
                        for rp, res in allocations.items()},
        'project_id': PROJECT, 'user_id': PROJECT,
        'consumer_generation': None}, version)


def candidates(query, version='1.39'):
    return Call('GET', '/allocation_candidates?' + query, None, version,
                'query')


CANDIDATES = ('GET', '/allocation_candidates')

ALLOWED = [
    Allowance(
        name='anchor collapse',
        request=CANDIDATES + (200, 200),
        evidence=('mended', 'anchors'),
        world=(provider('cn') + provider('numa', 'cn', {'MEMORY_MB': 4096},
                                         [AGG])
               + provider('ss0', None, {'IPV4_ADDRESS': 8}, [AGG], True)
               + provider('ss1', None, {'IPV4_ADDRESS': 8}, [AGG], True)),
        query=candidates('resources3=MEMORY_MB:512&resources=IPV4_ADDRESS:1'
                         '&group_policy=isolate'),
        reason='Placement keeps an unsuffixed-group answer made only of '
        'sharing providers for one of the trees tied to them '
        '(AllocationRequest.__eq__ ignores the anchor; docs/api.md, '
        '"Differences"); allot keeps it for every tree.'),
    Allowance(
        name='shared amounts',
        request=CANDIDATES + (200, 200),
        evidence=('mended', 'amounts'),
        world=(provider('cn', None, {'VCPU': 8}, [AGG])
               + provider('ss', None, {'DISK_GB': 100}, [AGG], True)
               + provider('ss2', None, {'DISK_GB': 100}, [AGG], True)),
        query=candidates('resources=DISK_GB:10,VCPU:1&resources1=DISK_GB:4'),
        reason='with a class asked for by several groups and group_policy '
        'other than none, Placement adds one candidate\'s amounts into '
        'objects shared with others (copy_arr_if_needed(); docs/api.md, '
        '"Differences"); allot answers the sums of the groups.'),
    Allowance(
        name='non-root sharing provider',
        request=CANDIDATES + (500, 200),
        evidence=('mended', 'summaries'),
        world=(provider('cn', None, {'VCPU': 8}, [AGG]) + provider('x')
               + provider('ss', 'x', {'DISK_GB': 100}, [AGG], True)),
        query=candidates('resources=VCPU:1,DISK_GB:10'),
        reason='a sharing provider that is not a root, serving another tree '
        'in the unsuffixed group, makes Placement fail with 500 '
        '(_build_provider_summaries() is given it as a root; docs/api.md, '
        '"Differences"); allot answers the candidates.'),
    Allowance(
        name='leaked consumer',
        request=(('PUT', 'POST'), '/allocations*', 409, (204, 400)),
        evidence=('mended', 'consumers'),
        world=(provider('cn', None, {'VCPU': 8})
               + [claim(CONSUMER, {NOWHERE: {'VCPU': 1}})]),
        query=claim(CONSUMER, {uuid_of('cn'): {'VCPU': 1}}),
        reason='Placement leaves behind the consumer record of an '
        'allocation write it refused with 400 for a provider that does not '
        'exist (ensure_consumer() runs before the check, outside the '
        'clean-up of a new consumer), so a later write with '
        'consumer_generation null gets 409 placement.concurrent_update; '
        'allot created nothing and goes on (204, or 400 when a provider is '
        'still missing).'),
    Allowance(
        name='order-dependent answer',
        request=CANDIDATES + (200, 200),
        evidence=('order',),
        world=None,
        query=None,
        reason='Placement\'s answer depends on the order its providers were '
        'created in (internal ids), and allot\'s is the one Placement gives '
        'for another order of the same calls; '
        '`python3 tests/differential/anchor_collapse.py` reproduces it on '
        'the anchor-collapse world.'),
]


def together(entries):
    """The mended entries `entries` as one: evidence with all their mends
    on at once, for an answer where known bugs meet."""
    return Allowance(
        name=' + '.join(e.name for e in entries), request=None,
        evidence=('mended', ','.join(e.evidence[1] for e in entries)),
        world=None, query=None,
        reason='; '.join(e.reason for e in entries))


def mended_for(call):
    """The entries with a mend whose request class has `call`'s method and
    path, whatever the statuses."""
    return [e for e in ALLOWED if e.evidence[0] == 'mended'
            and in_class(e, call)]


def in_class(entry, call):
    methods, pattern = entry.request[:2]
    if isinstance(methods, str):
        methods = (methods,)
    return (call.method in methods
            and fnmatch.fnmatchcase(normalize.shape(call.path), pattern))


def candidates_for(call, rep_a, rep_b):
    """The entries whose request class `call` and its two answers are in,
    in the order their evidence is tried."""
    return [e for e in ALLOWED if in_class(e, call)
            and rep_a['status'] in statuses(e.request[2])
            and rep_b['status'] in statuses(e.request[3])]


def statuses(spec):
    return spec if isinstance(spec, tuple) else (spec,)


# -- the reproductions -----------------------------------------------------

def reproduce(entry, servers, out):
    """Builds the entry's minimal world on each server and asks its query;
    True when the stock answer differs from allot's and the mended one
    equals it."""
    from differential import resolve  # it imports this module
    stock, mended, allot = servers
    mend = entry.evidence[1]
    answers = []
    for server, headers in ((stock, None), (mended, {
            'x-allot-placement-patches': mend}), (allot, None)):
        for call in entry.world:
            resp = server.request(call.method, call.path,
                                  resolve(server, call.body), call.version,
                                  headers)
            if resp.status >= 500:
                print('  %s: %s %s -> %d' % (server.label, call.method,
                                             call.path, resp.status),
                      file=out)
        q = entry.query
        resp = server.request(q.method, q.path, resolve(server, q.body),
                              q.version, headers)
        answers.append(normalize.normalize(q, resp))
    stock_rep, mended_rep, allot_rep = answers
    ok = (not normalize.same(stock_rep, allot_rep)
          and normalize.same(mended_rep, allot_rep))
    print('%s %s: %s %s' % ('ok  ' if ok else 'FAIL', entry.name,
                            entry.query.method, entry.query.path), file=out)
    for label, rep in zip(('placement', 'placement+' + mend, 'allot'),
                          answers):
        print('  %-22s %s' % (label, normalize.dumps(rep)[:300]), file=out)
    return ok


def main(argv):
    from differential import reset  # it imports this module
    from servers import Server, add_server_args
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    p = argparse.ArgumentParser(
        description='Reproduce every allowed.py entry with a minimal world: '
        'the stock Placement must differ from allot, the mended one agree.')
    add_server_args(p, repo)
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix='allot-allowed-')
    failed = 0
    servers = [
        Server('placement', 'placement', work,
               placement_venv=args.placement_venv),
        Server('placement', 'placement-mended', work,
               placement_venv=args.placement_venv, placement_patch=''),
        Server('allot', 'allot', work, allot_bin=args.allot_bin)]
    try:
        # Started side by side: a Placement takes seconds to start.
        starts = [threading.Thread(target=s.start) for s in servers]
        for t in starts:
            t.start()
        for t in starts:
            t.join()
        for k, entry in enumerate(ALLOWED):
            if entry.world is None:
                print('--   %s: %s' % (entry.name, entry.reason))
                continue
            if k:
                # The first entry (anchor collapse) depends on internal ids
                # and needs the fresh servers; the others do not.
                for server in servers:
                    reset(server)
            failed += not reproduce(entry, servers, sys.stdout)
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print('allowed: %d reproduced, %d failed'
          % (sum(1 for e in ALLOWED if e.world) - failed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
