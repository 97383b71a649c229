"""Shows that Placement 16.0's answer for the anchor-collapse world (class B in
docs/api.md, "Differences") depends on its internal provider ids.

The world is always the same: root `cn` with child `numa` (MEMORY_MB 4096, in
aggregate A) and two IPV4_ADDRESS pools `ss0`, `ss1` in A with
MISC_SHARES_VIA_AGGREGATE; the query is
`resources3=MEMORY_MB:512&resources=IPV4_ADDRESS:1&group_policy=isolate`.
Before building it, K providers with no inventory and no aggregate are
created, which only moves the internal ids of the world's providers. A fresh
Placement is started for each K. Placement answers 0 or 2 candidates
depending on K; allot answers 2 for every K (numa+ss0, numa+ss1).

    python3 tests/differential/anchor_collapse.py [--max-unrelated 12]

Needs the venv that scripts/differential makes
(~/.cache/allot-differential/venv, or ALLOT_DIFFERENTIAL_VENV); exits 1 if
Placement's answers do not depend on K (the explanation would then be wrong).
"""

import argparse
import os
import shutil
import sys
import tempfile

from servers import Server

AGGREGATE = '11111111-1111-1111-1111-111111111111'
UUIDS = {name: '%08d-0000-0000-0000-000000000000' % i
         for i, name in enumerate(['cn', 'numa', 'ss0', 'ss1'], 1)}
QUERY = ('/allocation_candidates?resources3=MEMORY_MB:512'
         '&resources=IPV4_ADDRESS:1&group_policy=isolate')


def expect(response, *statuses):
    if response.status not in statuses:
        raise SystemExit('unexpected %d: %s' % (response.status, response.text))
    return response


def build(server):
    """The world, through the API, in a fixed order."""
    for name in ['cn', 'numa', 'ss0', 'ss1']:
        body = {'name': name, 'uuid': UUIDS[name]}
        if name == 'numa':
            body['parent_provider_uuid'] = UUIDS['cn']
        expect(server.request('POST', '/resource_providers', body), 200)

    def put(name, what, body):
        path = '/resource_providers/%s' % UUIDS[name]
        body['resource_provider_generation'] = expect(
            server.request('GET', path), 200).body['generation']
        expect(server.request('PUT', '%s/%s' % (path, what), body), 200)

    put('numa', 'inventories', {'inventories': {'MEMORY_MB': {'total': 4096}}})
    put('numa', 'aggregates', {'aggregates': [AGGREGATE]})
    for pool in ['ss0', 'ss1']:
        put(pool, 'inventories', {'inventories': {'IPV4_ADDRESS': {'total': 8}}})
        put(pool, 'aggregates', {'aggregates': [AGGREGATE]})
        put(pool, 'traits', {'traits': ['MISC_SHARES_VIA_AGGREGATE']})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--max-unrelated', type=int, default=12)
    args = parser.parse_args()
    venv = os.environ.get('ALLOT_DIFFERENTIAL_VENV', os.path.expanduser(
        '~/.cache/allot-differential/venv'))
    work = tempfile.mkdtemp(prefix='anchor-collapse-')
    answers = {}
    try:
        for unrelated in range(args.max_unrelated + 1):
            server = Server('placement', 'placement', work, placement_venv=venv)
            server.start()
            try:
                for i in range(unrelated):
                    expect(server.request('POST', '/resource_providers',
                                          {'name': 'unrelated-%d' % i}), 200)
                build(server)
                body = expect(server.request('GET', QUERY), 200).body
                answers[unrelated] = len(body['allocation_requests'])
                print('%2d unrelated providers first: Placement answers %d '
                      'candidates' % (unrelated, answers[unrelated]), flush=True)
            finally:
                server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if len(set(answers.values())) < 2:
        print('Placement answered the same for every K: not id-dependent here')
        return 1
    print('Placement\'s answer depends on its internal ids: %s'
          % sorted(set(answers.values())))
    return 0


if __name__ == '__main__':
    sys.exit(main())
