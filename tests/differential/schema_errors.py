"""Schema error details: allot against the real Placement, word for word.

Sends the same invalid request bodies to the real OpenStack Placement 16.0.0
and to allot, at several microversions, and compares the status, the error
code and the whole `detail` of each answer. The cases cover every kind of
JSON Schema failure that Placement's body schemas can produce (type,
required, additionalProperties with and without patternProperties,
minimum/maximum, pattern, minLength/maxLength, minProperties, minItems,
uniqueItems, format uuid, anyOf) on every endpoint that takes a body, and
some invalid query strings (validated the same way). Deliberate differences
are listed in KNOWN and shown, not counted.

    python3 tests/differential/schema_errors.py            # compare, exit 1 on a difference
    python3 tests/differential/schema_errors.py -v         # also print the agreeing details
    python3 tests/differential/schema_errors.py --only reshaper

It uses the venv that scripts/differential makes (`ALLOT_DIFFERENTIAL_VENV`,
default ~/.cache/allot-differential/venv; run scripts/differential once to
make it) and target/release/allot (`ALLOT_BIN`). Python 3 standard library.
"""

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from servers import Server, add_server_args  # noqa: E402

RP = 'b7c5dd2c-5d59-4e52-b0a4-4c6bbb2f1e32'
RP2 = '0f7a6a93-3e2b-4c39-8a6f-0e0f4f7f5d11'
CONSUMER = '6e5a1f9a-8a7c-4d5e-9c36-2f5b2f3d4a10'
AGG = 'f918801a-5e54-4bee-9095-09a9d0c786b8'
LONG = 'x' * 256
WORDY = 'a long name with spaces ' * 12

PROVIDER = '/resource_providers/' + RP


def owner(**extra):
    body = {'project_id': 'p', 'user_id': 'u'}
    body.update(extra)
    return body


def alloc12(allocs, **extra):
    body = {'allocations': allocs}
    body.update(owner(**extra))
    return body


GOOD_RES = {'resources': {'VCPU': 1}}

# (family, method, path, microversion, body)
CASES = [
    # POST /resource_providers
    ('providers', 'POST', '/resource_providers', '1.0', []),
    ('providers', 'POST', '/resource_providers', '1.0', {}),
    ('providers', 'POST', '/resource_providers', '1.0', {'name': 1}),
    ('providers', 'POST', '/resource_providers', '1.0', {'name': None}),
    ('providers', 'POST', '/resource_providers', '1.0', {'name': True}),
    ('providers', 'POST', '/resource_providers', '1.0', {'name': 1.5}),
    ('providers', 'POST', '/resource_providers', '1.0', {'name': 'x' * 201}),
    ('providers', 'POST', '/resource_providers', '1.0', {'name': WORDY}),
    ('providers', 'POST', '/resource_providers', '1.0',
     {'name': 'a', 'uuid': 'not-a-uuid'}),
    ('providers', 'POST', '/resource_providers', '1.0',
     {'name': 'a', 'uuid': 7}),
    ('providers', 'POST', '/resource_providers', '1.0',
     {'name': 'a', 'foo': 1}),
    ('providers', 'POST', '/resource_providers', '1.0',
     {'name': 'a', 'zed': 1, 'foo': 2}),
    ('providers', 'POST', '/resource_providers', '1.0',
     {'name': 'a', 'parent_provider_uuid': RP}),
    ('providers', 'POST', '/resource_providers', '1.14',
     {'name': 'a', 'parent_provider_uuid': 'bad'}),
    ('providers', 'POST', '/resource_providers', '1.14',
     {'name': 'a', 'parent_provider_uuid': 5}),
    ('providers', 'POST', '/resource_providers', '1.14', {'name': "it's"}),
    ('providers', 'POST', '/resource_providers', '1.39', ['x', {'y': 1}]),
    # PUT /resource_providers/{uuid}
    ('providers', 'PUT', PROVIDER, '1.0', {'name': 5}),
    ('providers', 'PUT', PROVIDER, '1.0', {'name': 'a', 'uuid': RP}),
    ('providers', 'PUT', PROVIDER, '1.14', {'name': 'a', 'uuid': RP}),
    ('providers', 'PUT', PROVIDER, '1.14',
     {'name': 'a', 'parent_provider_uuid': 'bad'}),
    ('providers', 'PUT', PROVIDER, '1.14', {}),
    # PUT /resource_providers/{uuid}/inventories
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0', []),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'inventories': {}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 'x', 'inventories': {}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0, 'inventories': []}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0,
      'inventories': {'VCPU': {'total': 0}}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0,
      'inventories': {'VCPU': {'total': 2147483648}}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0,
      'inventories': {'VCPU': {'total': 1, 'foo': 1}}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0,
      'inventories': {'VCPU': {'reserved': 1}}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0,
      'inventories': {'VCPU': {'total': 1, 'allocation_ratio': 3.5e38}}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0,
      'inventories': {'VCPU': {'total': 1, 'allocation_ratio': 'x'}}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0,
      'inventories': {'VCPU': {'total': 'x'}, 'DISK_GB': {'total': 'y'}}}),
    ('inventories', 'PUT', PROVIDER + '/inventories', '1.0',
     {'resource_provider_generation': 0, 'inventories': {}, 'x': 1}),
    # POST /resource_providers/{uuid}/inventories
    ('inventories', 'POST', PROVIDER + '/inventories', '1.0',
     {'total': 1}),
    ('inventories', 'POST', PROVIDER + '/inventories', '1.0',
     {'resource_class': 'vcpu', 'total': 1}),
    ('inventories', 'POST', PROVIDER + '/inventories', '1.0',
     {'resource_class': 'VCPU', 'total': 1, 'min_unit': 0}),
    ('inventories', 'POST', PROVIDER + '/inventories', '1.0',
     {'resource_class': 'VCPU', 'total': 1, 'step_size': -1.5}),
    # PUT /resource_providers/{uuid}/inventories/{class}
    ('inventories', 'PUT', PROVIDER + '/inventories/VCPU', '1.0',
     {'total': 1}),
    ('inventories', 'PUT', PROVIDER + '/inventories/VCPU', '1.0',
     {'total': 1, 'resource_provider_generation': 0, 'max_unit': 0}),
    ('inventories', 'PUT', PROVIDER + '/inventories/VCPU', '1.0',
     {'total': 1, 'resource_provider_generation': 0,
      'resource_class': 'VCPU'}),
    # PUT /resource_providers/{uuid}/traits
    ('traits', 'PUT', PROVIDER + '/traits', '1.6',
     {'traits': 'x', 'resource_provider_generation': 0}),
    ('traits', 'PUT', PROVIDER + '/traits', '1.6',
     {'traits': [''], 'resource_provider_generation': 0}),
    ('traits', 'PUT', PROVIDER + '/traits', '1.6',
     {'traits': [LONG], 'resource_provider_generation': 0}),
    ('traits', 'PUT', PROVIDER + '/traits', '1.6',
     {'traits': ['A', 1], 'resource_provider_generation': 0}),
    ('traits', 'PUT', PROVIDER + '/traits', '1.6', {'traits': []}),
    ('traits', 'PUT', PROVIDER + '/traits', '1.6',
     {'traits': [], 'resource_provider_generation': 0, 'x': None}),
    # PUT /resource_providers/{uuid}/aggregates
    ('aggregates', 'PUT', PROVIDER + '/aggregates', '1.1',
     {'aggregates': []}),
    ('aggregates', 'PUT', PROVIDER + '/aggregates', '1.1', ['bad']),
    ('aggregates', 'PUT', PROVIDER + '/aggregates', '1.1', [AGG, AGG]),
    ('aggregates', 'PUT', PROVIDER + '/aggregates', '1.19', [AGG]),
    ('aggregates', 'PUT', PROVIDER + '/aggregates', '1.19',
     {'aggregates': [AGG, AGG], 'resource_provider_generation': 0}),
    ('aggregates', 'PUT', PROVIDER + '/aggregates', '1.19',
     {'aggregates': [AGG, 5], 'resource_provider_generation': 0}),
    ('aggregates', 'PUT', PROVIDER + '/aggregates', '1.19',
     {'aggregates': []}),
    # resource classes
    ('classes', 'POST', '/resource_classes', '1.2', {'name': 'FOO'}),
    ('classes', 'POST', '/resource_classes', '1.2', {}),
    ('classes', 'POST', '/resource_classes', '1.2',
     {'name': 'CUSTOM_' + 'A' * 250}),
    ('classes', 'POST', '/resource_classes', '1.2',
     {'name': 'CUSTOM_A', 'x': 1}),
    ('classes', 'PUT', '/resource_classes/CUSTOM_A', '1.2',
     {'name': 'bad'}),
    # PUT /allocations/{consumer}, list form
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.0',
     {'allocations': []}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.0',
     {'allocations': [{'resource_provider': {'uuid': 'bad'},
                       'resources': {'VCPU': 1}}]}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.0',
     {'allocations': [{'resource_provider': {'uuid': RP},
                       'resources': {'VCPU': 0}}]}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.0',
     {'allocations': [{'resource_provider': {'uuid': RP},
                       'resources': {}}]}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.0',
     {'allocations': [{'resource_provider': {'uuid': RP},
                       'resources': {'vcpu': 1}}]}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.0',
     {'allocations': [{'resource_provider': {'uuid': RP},
                       'resources': {'vcpu': 1, 'disk': 2}}]}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.0',
     {'allocations': [{'resource_provider': {'uuid': RP}}]}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.0',
     {'allocations': [{'resource_provider': {'uuid': RP},
                       'resources': {'VCPU': 1}}],
      'project_id': 'p'}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.8',
     {'allocations': [{'resource_provider': {'uuid': RP},
                       'resources': {'VCPU': 1}}]}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.8',
     {'allocations': [{'resource_provider': {'uuid': RP},
                       'resources': {'VCPU': 1}}],
      'project_id': '', 'user_id': 'u'}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.8',
     {'allocations': [{'resource_provider': {'uuid': RP},
                       'resources': {'VCPU': 1}}],
      'project_id': 'p', 'user_id': LONG}),
    # PUT /allocations/{consumer}, dict form
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.12',
     alloc12({})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.12',
     alloc12([])),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.12',
     alloc12({'bad': GOOD_RES})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.12',
     alloc12({RP: {}})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.12',
     alloc12({RP: {'resources': {'VCPU': 1}, 'foo': 1}})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.12',
     alloc12({RP: {'resources': {'VCPU': 1}, 'generation': 'x'}})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.12',
     {'allocations': {RP: GOOD_RES}}),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.28',
     alloc12({RP: GOOD_RES})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.28',
     alloc12({RP: GOOD_RES}, consumer_generation='x')),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.28',
     alloc12({RP: {'resources': {'VCPU': -1}}}, consumer_generation=None)),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.34',
     alloc12({RP: GOOD_RES}, consumer_generation=None, mappings={})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.34',
     alloc12({RP: GOOD_RES}, consumer_generation=None,
             mappings={'a': []})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.34',
     alloc12({RP: GOOD_RES}, consumer_generation=None,
             mappings={'a': ['bad']})),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.34',
     alloc12({RP: GOOD_RES}, consumer_generation=None, mappings=[])),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.38',
     alloc12({RP: GOOD_RES}, consumer_generation=None)),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.38',
     alloc12({RP: GOOD_RES}, consumer_generation=None,
             consumer_type='lower')),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.38',
     alloc12({RP: GOOD_RES}, consumer_generation=None, consumer_type='')),
    ('allocations', 'PUT', '/allocations/' + CONSUMER, '1.38',
     alloc12({RP: GOOD_RES}, consumer_generation=None,
             consumer_type='X' * 256)),
    # POST /allocations
    ('allocations', 'POST', '/allocations', '1.13', []),
    ('allocations', 'POST', '/allocations', '1.13', {}),
    ('allocations', 'POST', '/allocations', '1.13',
     {'bad': alloc12({RP: GOOD_RES})}),
    ('allocations', 'POST', '/allocations', '1.13',
     {CONSUMER: {'allocations': {RP: GOOD_RES}}}),
    ('allocations', 'POST', '/allocations', '1.13',
     {CONSUMER: alloc12({RP: {'resources': {'VCPU': 0}}})}),
    ('allocations', 'POST', '/allocations', '1.28',
     {CONSUMER: alloc12({RP: GOOD_RES})}),
    ('allocations', 'POST', '/allocations', '1.38',
     {CONSUMER: alloc12({RP: GOOD_RES}, consumer_generation=None)}),
    ('allocations', 'POST', '/allocations', '1.39',
     {CONSUMER: alloc12({}, consumer_generation=None, consumer_type=5)}),
    # POST /reshaper
    ('reshaper', 'POST', '/reshaper', '1.30', {}),
    ('reshaper', 'POST', '/reshaper', '1.30',
     {'inventories': {}, 'allocations': {}}),
    ('reshaper', 'POST', '/reshaper', '1.30',
     {'inventories': {'bad': {}}, 'allocations': {}}),
    ('reshaper', 'POST', '/reshaper', '1.30',
     {'inventories': {RP: {}}, 'allocations': {}}),
    ('reshaper', 'POST', '/reshaper', '1.30',
     {'inventories': {RP: {'resource_provider_generation': 0,
                           'inventories': {'VCPU': {'total': 0}}}},
      'allocations': {}}),
    ('reshaper', 'POST', '/reshaper', '1.30',
     {'inventories': {RP: {'resource_provider_generation': 0,
                           'inventories': {}}},
      'allocations': {CONSUMER: {}}}),
    ('reshaper', 'POST', '/reshaper', '1.30',
     {'inventories': {RP: {'resource_provider_generation': 0,
                           'inventories': {}}},
      'allocations': []}),
    ('reshaper', 'POST', '/reshaper', '1.34',
     {'inventories': {RP: {'resource_provider_generation': 0,
                           'inventories': {}}},
      'allocations': 5}),
    ('reshaper', 'POST', '/reshaper', '1.38',
     {'inventories': [], 'allocations': {}}),
    ('reshaper', 'POST', '/reshaper', '1.38',
     {'inventories': {RP: {'resource_provider_generation': 0,
                           'inventories': {}}},
      'allocations': {CONSUMER: alloc12({}, consumer_generation=None)}}),
    # Python's repr and pprint: quotes, escapes, long strings and lists.
    ('classes', 'POST', '/resource_classes', '1.2',
     {'nam': 'it\'s "both" \u00e9\u00a0\x01\t\n\\'}),
    ('classes', 'POST', '/resource_classes', '1.2', {'nam': "it's"}),
    ('classes', 'POST', '/resource_classes', '1.2', {'nam': WORDY}),
    ('classes', 'POST', '/resource_classes', '1.2',
     {'nam': [WORDY, {'k': WORDY}, 1e-7, -0.0, 1e16, 123.25]}),
    ('aggregates', 'PUT', PROVIDER + '/aggregates', '1.1',
     [AGG, RP, RP2, CONSUMER, AGG]),
    ('inventories', 'PUT', PROVIDER + '/inventories/VCPU', '1.0',
     {'total': 0.5, 'resource_provider_generation': 0}),
    # Query strings go through the same validator.
    ('queries', 'GET', '/resource_providers?uuid=bad', '1.0', None),
    ('queries', 'GET', '/resource_providers?foo=1', '1.18', None),
    ('queries', 'GET', '/usages?project_id=', '1.9', None),
    ('queries', 'GET', '/usages?user_id=u', '1.9', None),
    ('queries', 'GET', '/usages?project_id=p&consumer_type=lower', '1.38',
     None),
    ('queries', 'GET', '/allocation_candidates?resources=VCPU:1&foo=1',
     '1.10', None),
    ('queries', 'GET', '/allocation_candidates?resources=VCPU:1&limit=0',
     '1.16', None),
    ('queries', 'GET', '/allocation_candidates?resources=VCPU:1&limit=',
     '1.21', None),
    ('queries', 'GET',
     '/allocation_candidates?resources=VCPU:1&group_policy=x', '1.25', None),
    ('queries', 'GET', '/allocation_candidates?resources_X=VCPU:1', '1.25',
     None),
    ('queries', 'GET', '/allocation_candidates?resources=VCPU:1&x=1&y=2',
     '1.36', None),
]

# Known differences (docs/api.md, "Differences"): compared and shown, but
# not counted as failures.
KNOWN = [
    # jsonschema counts integral floats (1.0, 1e20, -0.0) as integers;
    # allot's typed bodies cannot take them, so its schema refuses them.
    ('inventories', 'PUT', PROVIDER + '/inventories/VCPU', '1.0',
     {'total': 1.0, 'resource_provider_generation': 0}),
    ('inventories', 'PUT', PROVIDER + '/inventories/VCPU', '1.0',
     {'total': 1e20, 'resource_provider_generation': 0}),
    ('inventories', 'PUT', PROVIDER + '/inventories/VCPU', '1.0',
     {'total': 1, 'reserved': -0.0, 'resource_provider_generation': 0}),
    # webob strips anything that looks like an HTML tag from the detail.
    ('classes', 'POST', '/resource_classes', '1.2',
     {'name': 'CUSTOM_A', '<b>': 1}),
    # Python reads integers of any size; serde_json makes a float of them.
    ('inventories', 'PUT', PROVIDER + '/inventories/VCPU', '1.0',
     {'total': 99999999999999999999, 'resource_provider_generation': 0}),
]


def detail(resp):
    body = resp.body
    if isinstance(body, dict) and body.get('errors'):
        err = body['errors'][0]
        return err.get('code'), err.get('detail')
    return None, resp.text


def setup(server):
    """The records the cases' paths name."""
    for method, path, version, body in [
            ('POST', '/resource_providers', '1.20',
             {'name': 'rp', 'uuid': RP}),
            ('POST', '/resource_classes', '1.2', {'name': 'CUSTOM_A'})]:
        resp = server.request(method, path, body, version)
        if resp.status >= 400:
            raise SystemExit('%s: setup %s %s gave %s: %s'
                             % (server.label, method, path, resp.status,
                                resp.text))


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_args(p, repo)
    p.add_argument('--only', help='one family: providers, inventories, '
                   'traits, aggregates, classes, allocations, reshaper, '
                   'queries')
    p.add_argument('-v', '--verbose', action='store_true')
    args = p.parse_args(argv)

    workroot = tempfile.mkdtemp(prefix='allot-schema-errors-')
    placement = Server('placement', 'placement', workroot,
                       placement_venv=args.placement_venv)
    allot = Server('allot', 'allot', workroot, allot_bin=args.allot_bin)
    differ = 0
    compared = 0
    try:
        placement.start()
        allot.start()
        for server in (placement, allot):
            setup(server)
        known = 0
        for case in CASES + KNOWN:
            family, method, path, version, body = case
            if args.only and family != args.only:
                continue
            compared += 1
            want = placement.request(method, path, body, version)
            got = allot.request(method, path, body, version)
            w = (want.status,) + detail(want)
            g = (got.status,) + detail(got)
            label = '%s %s @%s %s' % (method, path, version,
                                      _short(body))
            if w != g:
                if case in KNOWN:
                    known += 1
                    compared -= 1
                    print('KNOWN  %s' % label)
                else:
                    differ += 1
                    print('DIFFER %s' % label)
                print('  placement: %s %s\n    %s' % w)
                print('  allot:     %s %s\n    %s' % g)
            elif args.verbose:
                print('same   %s\n    %s %s\n    %s' % ((label,) + w))
    finally:
        placement.stop()
        allot.stop()
    if differ == 0:
        shutil.rmtree(workroot, ignore_errors=True)
    else:
        print('server logs: %s' % workroot)
    if known:
        print('%d known differences (docs/api.md)' % known)
    print('%d passed, %d failed' % (compared - differ, differ))
    return 1 if differ else 0


def _short(body):
    import json
    text = json.dumps(body)
    return text if len(text) <= 100 else text[:97] + '...'


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
