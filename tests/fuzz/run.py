"""The API fuzzed from its own document (issue 46), run by scripts/fuzz.

    python run.py ALLOT_BIN [--database URL] [--max-examples N] [--seed N]

1. docs/openapi.json validates (openapi-spec-validator).
2. allot is started as the conformance suite starts it (scripts/conformance-server:
   a fresh SQLite file, or a fresh database on the PostgreSQL or MariaDB server of
   --database; the legacy policy, noauth2), a small cloud is made through the API
   (the provider and consumer the document's examples name, a child, a sharing
   pool), and schemathesis runs every operation: its examples, the coverage phase
   and a bounded number of generated cases, with the checks of CHECKS. Where a
   generic check and Placement's behaviour disagree the document says Placement's
   behaviour, and the check is switched off for that case in schemathesis.toml
   beside this file, with why.
3. The server's invariants, through the API, before and after the run: every provider's usages
   are the sum of its allocations, and its pending totals the sum of its live claims.

Prints `fuzz: N passed, N failed` last (each operation, the validation and each
invariant of each provider counts once); exit status 1 if anything failed.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SPEC = os.path.join(REPO, 'docs', 'openapi.json')
# The document's examples name these (crates/allot-server/src/openapi/components.rs).
PROVIDER = 'a11070fe-0000-4000-8000-000000000001'
CONSUMER = 'a11070fe-0000-4000-8000-000000000002'
CHILD = 'a11070fe-0000-4000-8000-000000000003'
POOL = 'a11070fe-0000-4000-8000-000000000004'
AGGREGATE = 'a11070fe-0000-4000-8000-0000000000a9'
CHECKS = ['not_a_server_error', 'status_code_conformance',
          'content_type_conformance', 'response_schema_conformance']

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print('FAIL: %s' % what, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={
        'x-auth-token': 'admin', 'openstack-api-version': 'placement 1.39',
        'content-type': 'application/json', 'accept': 'application/json'})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def validate():
    from openapi_spec_validator import validate as spec_validate
    with open(SPEC) as f:
        spec = json.load(f)
    try:
        spec_validate(spec)
        check(True, 'docs/openapi.json validates')
    except Exception as e:  # the validator's own error, whatever its class
        check(False, 'docs/openapi.json does not validate: %s' % e)


def seed(base):
    """A cloud for the examples to reach past "not found"."""
    def must(status, out, want, what):
        if status != want:
            raise SystemExit('fuzz: seeding %s: %s %s' % (what, status, out))
    inventories = {'VCPU': {'total': 64}, 'MEMORY_MB': {'total': 65536},
                   'DISK_GB': {'total': 1000}}
    for uuid, name, parent in [(PROVIDER, 'fuzz-provider', None), (CHILD, 'fuzz-child', PROVIDER),
                               (POOL, 'fuzz-pool', None)]:
        body = {'name': name, 'uuid': uuid}
        if parent:
            body['parent_provider_uuid'] = parent
        status, out = call(base, 'POST', '/resource_providers', body)
        must(status, out, 200, name)
        status, out = call(base, 'PUT', '/resource_providers/%s/inventories' % uuid,
                           {'resource_provider_generation': 0, 'inventories': inventories})
        must(status, out, 200, name + ' inventories')
    must(*call(base, 'PUT', '/resource_classes/CUSTOM_FUZZ'), 201, 'CUSTOM_FUZZ')
    status, out = call(base, 'PUT', '/allocations/%s' % CONSUMER, {
        'allocations': {PROVIDER: {'resources': {'VCPU': 2}}, POOL: {'resources': {'DISK_GB': 10}}},
        'project_id': 'fuzz', 'user_id': 'fuzz', 'consumer_generation': None,
        'consumer_type': 'INSTANCE'})
    must(status, out, 204, 'allocations')
    status, out = call(base, 'POST', '/claims', {
        'consumer_uuid': 'a11070fe-0000-4000-8000-000000000005', 'project_id': 'fuzz',
        'user_id': 'fuzz', 'allocations': {CHILD: {'resources': {'VCPU': 1}}}})
    must(status, out, 201, 'claim')


def schemathesis(venv_bin, base, work, args):
    report = os.path.join(work, 'junit.xml')
    cmd = [os.path.join(venv_bin, 'schemathesis'), '--config-file',
           os.path.join(HERE, 'schemathesis.toml'), 'run', SPEC, '--url', base,
           '-H', 'X-Auth-Token: admin', '--checks', ','.join(CHECKS),
           '--phases', 'examples,coverage,fuzzing', '--max-examples', str(args.max_examples),
           '--seed', str(args.seed), '--workers', '1', '--no-shrink',
           '--report', 'junit', '--report-junit-path', report,
           '--request-timeout', '30', '--suppress-health-check', 'all']
    print('fuzz: %s' % ' '.join(cmd), flush=True)
    started = time.monotonic()
    code = subprocess.run(cmd, cwd=work).returncode
    print('fuzz: schemathesis exited %d after %.0f s' % (code, time.monotonic() - started), flush=True)
    try:
        suites = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as e:
        check(False, 'schemathesis wrote no report (%s)' % e)
        return
    cases = list(suites.iter('testcase'))
    for case in cases:
        bad = case.find('failure') is not None or case.find('error') is not None
        check(not bad, 'schemathesis: %s' % case.get('name'))
    check(bool(cases) and code == 0,
          'schemathesis exit status %d over %d operations' % (code, len(cases)))


def invariants(base, when):
    status, out = call(base, 'GET', '/resource_providers')
    if status != 200:
        check(False, 'listing providers %s the run: %s %s' % (when, status, out))
        return
    status, claims = call(base, 'GET', '/claims?state=pending')
    check(status == 200, 'listing claims %s the run: %s' % (when, status))
    counted = 0
    for rp in out['resource_providers']:
        u = rp['uuid']
        _, usages = call(base, 'GET', '/resource_providers/%s/usages' % u)
        _, allocations = call(base, 'GET', '/resource_providers/%s/allocations' % u)
        summed = {}
        for held in allocations['allocations'].values():
            for rc, n in held['resources'].items():
                summed[rc] = summed.get(rc, 0) + n
        used = {rc: n for rc, n in usages['usages'].items() if n}
        counted += len(allocations['allocations'])
        check(used == summed, '%s the run, provider %s: usages %s, allocations sum to %s' % (when, u, used, summed))
        _, pending = call(base, 'GET', '/resource_providers/%s/pending' % u)
        promised = {}
        for claim in claims['claims'] if status == 200 else []:
            for rc, n in claim['allocations'].get(u, {}).get('resources', {}).items():
                promised[rc] = promised.get(rc, 0) + n
        check(pending['pending'] == promised,
              '%s the run, provider %s: pending %s, live claims sum to %s' % (when, u, pending['pending'], promised))
    print('fuzz: invariants %s the run over %d providers, %d allocations, %d live claims'
          % (when, len(out['resource_providers']), counted, len(claims['claims']) if status == 200 else 0), flush=True)


def start(allot, work, database):
    env = dict(os.environ, ALLOT_BIN=allot)
    env.pop('ALLOT_CONFORMANCE_POSTGRES_URL', None)
    env.pop('ALLOT_CONFORMANCE_MARIADB_URL', None)
    if database:
        key = 'MARIADB' if database.startswith(('mysql://', 'mariadb://')) else 'POSTGRES'
        env['ALLOT_CONFORMANCE_%s_URL' % key] = database
    port = free_port()
    log = open(os.path.join(work, 'server.log'), 'w')
    proc = subprocess.Popen([os.path.join(REPO, 'scripts', 'conformance-server'), str(port),
                             os.path.join(work, 'db')], env=env, stdout=log, stderr=log)
    base = 'http://127.0.0.1:%d' % port
    for _ in range(300):
        try:
            urllib.request.urlopen(base + '/', timeout=5).read()
            return proc, base
        except OSError:
            if proc.poll() is not None:
                raise SystemExit('fuzz: the server exited %s (see %s/server.log)' % (proc.returncode, work))
            time.sleep(0.1)
    raise SystemExit('fuzz: the server did not answer (see %s/server.log)' % work)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('allot')
    parser.add_argument('--database')
    parser.add_argument('--max-examples', type=int, default=int(os.environ.get('ALLOT_FUZZ_EXAMPLES', '20')))
    parser.add_argument('--seed', type=int, default=int(os.environ.get('ALLOT_FUZZ_SEED', '46')))
    parser.add_argument('--work', default=None)
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix='allot-fuzz-')
    os.makedirs(work, exist_ok=True)
    validate()
    proc, base = start(args.allot, work, args.database)
    try:
        seed(base)
        # Before too: the check is seen to hold on the seeded cloud (allocations and
        # a claim), whatever the fuzzer's deletes leave of it.
        invariants(base, 'before')
        schemathesis(os.path.dirname(sys.executable), base, work, args)
        invariants(base, 'after')
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print('fuzz: work directory %s' % work)
    print('fuzz: %d passed, %d failed' % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
