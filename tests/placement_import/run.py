"""`allot import --from-placement` and `allot export --to-placement` against the
real OpenStack Placement 16.0.0 (issue 22), run by scripts/placement-import.

For each database Placement can keep its data in (a throwaway MariaDB and a
throwaway PostgreSQL), a world is built through Placement's own API; then:

1. `allot import --from-placement` into SQLite (and, on PostgreSQL, into a
   PostgreSQL allot database too); allot serving it must answer every GET of
   `gets()` at several microversions with the same status and the same JSON as
   Placement did (request ids blanked; lists compared as sets, see
   `canonical`), so generations are equal;
2. a write with a provider generation read from Placement before the switch
   succeeds on allot after it (what Nova's cached provider tree does);
3. `allot export --to-placement` into a fresh database made by `placement-manage
   db sync`, and Placement serving that gives the same answers again;
4. on MariaDB, the drop-in (`served_beside`): with Placement's own user and
   placement.conf, allot's database made beside Placement's on the same server
   (docs/migrate.md's SQL, `allot db sync --placement-conf`), refused while it
   is empty, imported into, then served by `allot serve --placement-conf` with
   no --database, and `allot verify` against the running Placement finds no
   difference docs/api.md does not document; then, with that allot serving
   on, docs/migrate.md's way back as written (`way_back`): writes through
   allot, Placement's database dropped, made again and synced by
   `placement-manage db sync`, allot's exported into it while allot serves
   (refused without --drop-extensions), Placement started on it and checked
   against allot by `allot verify`, then allot stopped;
5. the refusals: a bad URL, an unsupported schema revision, wrong credentials,
   an unreachable host (a closed port, and one that takes the connection
   but never answers), a non-empty target (both directions), and pending
   claims or class metadata without --drop-extensions; each exits 1 naming the
   cause, and writes nothing.

Run with the Placement venv's python (it has PyMySQL and psycopg2). Prints
`placement-import: N passed, N failed` last; exit status 1 if anything failed.
With --bench-seed ROOTS it tests nothing and seeds the benchmark's database
instead (`bench_seed`, for scripts/placement-import --bench).
"""

import argparse
import http.client
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib

VERSIONS = ['1.0', '1.14', '1.28', '1.38', '1.39']
PLACEHOLDER = '00000000-0000-0000-0000-000000000000'

passed = 0
failed = 0


def check(ok, what, detail=''):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print('FAIL: %s%s' % (what, ('\n' + detail) if detail else ''),
              flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Server:
    """Placement (gunicorn) or allot serving one database, on a free port."""

    def __init__(self, argv, env, log, port=None):
        # A given port: a server started again where its clients knew it.
        self.port = port or free_port()
        argv = [a.replace('{port}', str(self.port)) for a in argv]
        self.log = log
        with open(log, 'wb') as fh:
            self.proc = subprocess.Popen(argv, stdout=fh,
                                         stderr=subprocess.STDOUT, env=env,
                                         stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError('server exited: %s' % self.tail())
            try:
                self.get('/', '1.0')
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError('server did not start: %s'
                                       % self.tail())
                time.sleep(0.2)

    def tail(self):
        with open(self.log, 'rb') as fh:
            return fh.read().decode('utf-8', 'replace')[-3000:]

    def request(self, method, path, version, body=None):
        headers = {'x-auth-token': 'admin', 'accept': 'application/json',
                   'openstack-api-version': 'placement %s' % version}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers['content-type'] = 'application/json'
        conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=60)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def get(self, path, version):
        return self.request('GET', path, version)

    def ok(self, method, path, version='1.39', body=None):
        status, text = self.request(method, path, version, body)
        if status >= 300:
            raise RuntimeError('%s %s at %s: %s %s'
                               % (method, path, version, status, text))
        return json.loads(text) if text else None

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def placement(venv, url, work, name, workers=1):
    # The WSGI app reads placement.conf from OS_PLACEMENT_CONFIG_DIR.
    confdir = os.path.join(work, name)
    os.makedirs(confdir)
    conf = os.path.join(confdir, 'placement.conf')
    with open(conf, 'w') as fh:
        fh.write('[DEFAULT]\ndebug = False\n[api]\nauth_strategy = noauth2\n'
                 '[placement_database]\nconnection = %s\n'
                 '[oslo_policy]\nenforce_new_defaults = False\n' % url)
    db_sync(venv, conf)
    return placement_api(venv, conf, os.path.join(work, name + '.log'),
                         workers=workers)


def placement_api(venv, conf, log, workers=1, port=None):
    """Placement's API under gunicorn, on the placement.conf `conf` as it is
    (its schema already made)."""
    server = Server([os.path.join(venv, 'bin', 'gunicorn'), '-w', str(workers),
                     '-b', '127.0.0.1:{port}', '--timeout', '300',
                     'placement.wsgi.api:application'],
                    dict(os.environ,
                         OS_PLACEMENT_CONFIG_DIR=os.path.dirname(conf)),
                    log, port)
    server.conf = conf
    return server


def db_sync(venv, conf):
    subprocess.run([os.path.join(venv, 'bin', 'placement-manage'),
                    '--config-file', conf, 'db', 'sync'], check=True,
                   stdout=subprocess.DEVNULL)


def allot_serve(allot, database, work, name):
    return Server([allot, 'serve', '--bind', '127.0.0.1:{port}',
                   '--database', database, '--log', 'warn',
                   '--policy', 'legacy'], dict(os.environ),
                  os.path.join(work, name + '.log'))


def allot(binary, *args):
    return subprocess.run([binary] + list(args), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)


# ----- the world, built through Placement's API -----

def build_world(p):
    """Returns what the comparisons walk: consumers (including deleted ones)
    and projects."""
    u = lambda: str(uuidlib.uuid4())
    for c in ('CUSTOM_GPU', 'CUSTOM_FPGA'):
        p.ok('POST', '/resource_classes', body={'name': c})
    for t in ('CUSTOM_FAST', 'CUSTOM_RACK_1'):
        p.ok('PUT', '/traits/' + t)
    rp = {}
    for name, parent in [('cn1', None), ('numa0', 'cn1'), ('numa1', 'cn1'),
                         ('pf0', 'numa0'), ('cn2', None), ('ss1', None),
                         ('gone', None), ('lonely', None)]:
        rp[name] = u()
        body = {'name': name, 'uuid': rp[name]}
        if parent:
            body['parent_provider_uuid'] = rp[parent]
        p.ok('POST', '/resource_providers', body=body)
    p.ok('DELETE', '/resource_providers/' + rp.pop('gone'))

    def inv(name, inventories):
        gen = p.ok('GET', '/resource_providers/' + rp[name])['generation']
        p.ok('PUT', '/resource_providers/%s/inventories' % rp[name],
             body={'resource_provider_generation': gen,
                   'inventories': inventories})

    inv('cn1', {'VCPU': {'total': 16, 'allocation_ratio': 4.0},
                'MEMORY_MB': {'total': 32768, 'reserved': 1024,
                              'max_unit': 16384, 'step_size': 256}})
    inv('numa0', {'CUSTOM_GPU': {'total': 4, 'max_unit': 2}})
    inv('numa1', {'CUSTOM_FPGA': {'total': 2}})
    inv('pf0', {'SRIOV_NET_VF': {'total': 8, 'reserved': 1, 'min_unit': 1,
                                 'max_unit': 4}})
    inv('cn2', {'VCPU': {'total': 8, 'allocation_ratio': 1.5},
                'MEMORY_MB': {'total': 4096, 'reserved': 512}})
    inv('ss1', {'DISK_GB': {'total': 1000, 'allocation_ratio': 1.1}})
    inv('lonely', {'VCPU': {'total': 1}})

    def traits(name, names):
        gen = p.ok('GET', '/resource_providers/' + rp[name])['generation']
        p.ok('PUT', '/resource_providers/%s/traits' % rp[name],
             body={'resource_provider_generation': gen, 'traits': names})

    traits('cn1', ['HW_CPU_X86_AVX2', 'CUSTOM_FAST'])
    traits('cn2', ['CUSTOM_RACK_1'])
    traits('ss1', ['MISC_SHARES_VIA_AGGREGATE'])
    agg1, agg2 = u(), u()
    for name, aggs in [('cn1', [agg1]), ('cn2', [agg1, agg2]),
                       ('ss1', [agg1])]:
        gen = p.ok('GET', '/resource_providers/' + rp[name])['generation']
        p.ok('PUT', '/resource_providers/%s/aggregates' % rp[name],
             body={'resource_provider_generation': gen, 'aggregates': aggs})

    proj_a, proj_b, user_a = u(), u(), u()
    consumers = {}

    def alloc(name, allocations, project=proj_a, ctype=None, version='1.39'):
        consumers[name] = consumers.get(name) or u()
        c = consumers[name]
        current = p.ok('GET', '/allocations/' + c, version='1.39')
        body = {'allocations': {rp[k]: {'resources': v}
                                for k, v in allocations.items()},
                'project_id': project, 'user_id': user_a,
                'consumer_generation': current.get('consumer_generation')}
        if version >= '1.38':
            body['consumer_type'] = ctype or 'INSTANCE'
        p.ok('PUT', '/allocations/' + c, version=version, body=body)

    # One consumer on several providers of a tree and a sharing provider.
    alloc('vm1', {'cn1': {'VCPU': 2, 'MEMORY_MB': 2048},
                  'numa0': {'CUSTOM_GPU': 1}, 'pf0': {'SRIOV_NET_VF': 2},
                  'ss1': {'DISK_GB': 20}})
    alloc('vm1', {'cn1': {'VCPU': 4, 'MEMORY_MB': 2048},
                  'numa0': {'CUSTOM_GPU': 2}, 'ss1': {'DISK_GB': 20}})
    alloc('vm2', {'cn2': {'VCPU': 3, 'MEMORY_MB': 1024}}, project=proj_b,
          ctype='MIGRATION')
    alloc('vm3', {'cn2': {'VCPU': 1}, 'ss1': {'DISK_GB': 5}},
          version='1.28')
    alloc('vm4', {'numa1': {'CUSTOM_FPGA': 1}}, ctype='CUSTOM_BAREMETAL')
    alloc('doomed', {'cn1': {'VCPU': 1}})
    p.ok('DELETE', '/allocations/' + consumers['doomed'])
    alloc('emptied', {'cn2': {'MEMORY_MB': 256}})
    gen = p.ok('GET', '/allocations/' + consumers['emptied'])[
        'consumer_generation']
    p.ok('PUT', '/allocations/' + consumers['emptied'],
         body={'allocations': {}, 'project_id': proj_a, 'user_id': user_a,
               'consumer_generation': gen, 'consumer_type': 'INSTANCE'})
    # The incomplete consumer, made the way Placement makes one: a write
    # before 1.8, which has no project or user.
    consumers['old'] = u()
    p.ok('PUT', '/allocations/' + consumers['old'], version='1.0',
         body={'allocations': [{'resource_provider': {'uuid': rp['cn2']},
                                'resources': {'VCPU': 1}}]})
    # Several consumers in one POST (1.13).
    consumers['post1'], consumers['post2'] = u(), u()
    p.ok('POST', '/allocations', version='1.28', body={
        consumers['post1']: {'allocations': {rp['cn1']: {'resources': {
            'VCPU': 1}}}, 'project_id': proj_b, 'user_id': user_a,
            'consumer_generation': None},
        consumers['post2']: {'allocations': {rp['ss1']: {'resources': {
            'DISK_GB': 100}}}, 'project_id': proj_b, 'user_id': user_a,
            'consumer_generation': None}})
    return {'rp': rp, 'consumers': consumers,
            'projects': [proj_a, proj_b, PLACEHOLDER], 'user': user_a,
            'aggs': [agg1, agg2]}


def gets(world):
    paths = ['/', '/resource_providers', '/resource_classes', '/traits',
             '/traits?name=startswith:CUSTOM', '/resource_classes/CUSTOM_GPU',
             '/resource_providers?resources=VCPU:1',
             '/resource_providers?member_of=in:%s' % ','.join(world['aggs']),
             '/resource_providers?in_tree=%s' % world['rp']['cn1'],
             '/resource_providers?required=CUSTOM_FAST',
             '/allocation_candidates?resources=VCPU:1,MEMORY_MB:512',
             '/allocation_candidates?resources=VCPU:1,DISK_GB:10',
             '/allocation_candidates?resources=VCPU:1&required=CUSTOM_RACK_1',
             '/allocation_candidates?resources=VCPU:1&resources1=CUSTOM_GPU:1'
             '&group_policy=none',
             '/allocation_candidates?resources=DISK_GB:1&limit=2']
    for u in world['rp'].values():
        base = '/resource_providers/' + u
        paths += [base, base + '/inventories', base + '/inventories/VCPU',
                  base + '/traits', base + '/aggregates', base + '/usages',
                  base + '/allocations']
    for c in world['consumers'].values():
        paths.append('/allocations/' + c)
    for p in world['projects']:
        paths += ['/usages?project_id=' + p,
                  '/usages?project_id=%s&user_id=%s' % (p, world['user'])]
    return paths


REQUEST_ID = re.compile(r'req-[0-9a-f-]{36}')
NOT_FOUND = re.compile(r'"detail": ?"The resource could not be found\.\\n\\n'
                       r'( The resource could not be found\.)?  ( )?"')


def canonical(value):
    """A JSON value with every list sorted: Placement's listings have no ORDER
    BY, so on MariaDB and PostgreSQL their order is the query plan's."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [canonical(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    return value


def answers(server, world):
    """Every GET at every version: the status and the body as canonical JSON
    text (allot writes compact JSON, Placement with spaces: the same values),
    request ids blanked."""
    out = {}
    for path in gets(world):
        for v in VERSIONS:
            status, text = server.get(path, v)
            text = REQUEST_ID.sub('req-X', text)
            if status == 404:
                # A route from a later microversion: Placement under gunicorn
                # repeats no explanation, allot repeats the title (a known
                # difference of the error text, not of the data).
                text = NOT_FOUND.sub('"detail": "-"', text)
            try:
                text = json.dumps(canonical(json.loads(text)), sort_keys=True)
            except ValueError:
                pass
            out[(path, v)] = (status, text)
    return out


def compare(expected, server, world, label):
    got = answers(server, world)
    # Placement 16 on PostgreSQL answers /usages at 1.38+ with a 500 (its GROUP
    # BY is MySQL's); there is nothing to match, so those are named, not compared.
    broken = [k for k in expected if expected[k][0] == 500]
    if broken:
        print('note: Placement erred (500) on %d GETs, not compared: %s'
              % (len(broken), sorted({k[0].split('?')[0] for k in broken})))
    diffs = ['%s at %s:\n  placement: %s %s\n  %s: %s %s'
             % (k[0], k[1], expected[k][0], expected[k][1][:400], label,
                got[k][0], got[k][1][:400])
             for k in expected
             if expected[k] != got.get(k) and expected[k][0] != 500]
    check(not diffs, '%s answers as Placement did (%d GETs, %d differ)'
          % (label, len(expected), len(diffs)),
          '\n'.join(diffs[:6] + [d.split(':')[0] for d in diffs[6:40]]))
    return not diffs


def refused(result, cause, what):
    ok = result.returncode == 1 and cause in result.stderr
    check(ok, '%s is refused naming %r' % (what, cause),
          'exit %s, stderr: %s' % (result.returncode, result.stderr[-800:]))


# ----- the databases -----

class MariaDB:
    name = 'mariadb'
    # Placement's own user's password, as SQLAlchemy reads it up to the `@`.
    PASSWORD = 'pl/ace:ment'

    def __init__(self, root_url):
        import pymysql
        m = re.match(r'mysql://root@([^:/]+):(\d+)/', root_url)
        self.host, self.port = m.group(1), int(m.group(2))
        self.pymysql = pymysql

    def admin(self, sql):
        conn = self.pymysql.connect(host=self.host, port=self.port,
                                    user='root', autocommit=True)
        with conn.cursor() as cur:
            for stmt in sql.split(';'):
                if stmt.strip():
                    cur.execute(stmt)
        conn.close()

    def fresh(self, db):
        self.admin('DROP DATABASE IF EXISTS %s; CREATE DATABASE %s '
                   'CHARACTER SET utf8mb4' % (db, db))
        return self.url(db, 'mysql+pymysql') + '?charset=utf8'

    def url(self, db, scheme='mysql', user='root', password=''):
        cred = user + (':' + password if password else '')
        return '%s://%s@%s:%d/%s' % (scheme, cred, self.host, self.port, db)

    def wrong_password(self, db):
        self.admin("CREATE USER IF NOT EXISTS 'placement'@'%%' IDENTIFIED BY "
                   "'right'; GRANT ALL ON %s.* TO 'placement'@'%%'" % db)
        return self.url(db, 'mysql+pymysql', 'placement', 'wrong')

    def service_user(self, db):
        """The connection a deployment's placement.conf has: Placement's own
        user, granted its database only, as deployment tools grant it."""
        # ALTER: a server kept from an earlier run may have the user already.
        self.admin("CREATE USER IF NOT EXISTS 'placement'@'%%'; ALTER USER "
                   "'placement'@'%%' IDENTIFIED BY '%s'; GRANT ALL PRIVILEGES "
                   "ON %s.* TO 'placement'@'%%'" % (self.PASSWORD, db))
        return self.url(db, 'mysql+pymysql', 'placement',
                        self.PASSWORD) + '?charset=utf8'


class Postgres:
    name = 'postgresql'

    def __init__(self, root_url):
        import psycopg2
        self.psycopg2 = psycopg2
        m = re.match(r'postgres://postgres@([^:/]+):(\d+)/', root_url)
        self.host, self.port = m.group(1), int(m.group(2))

    def admin(self, sql, db='postgres'):
        conn = self.psycopg2.connect(host=self.host, port=self.port,
                                     user='postgres', dbname=db)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(sql)
        conn.close()

    def fresh(self, db):
        self.admin('DROP DATABASE IF EXISTS %s' % db)
        self.admin('CREATE DATABASE %s' % db)
        return self.url(db, 'postgresql+psycopg2')

    def url(self, db, scheme='postgresql', user='postgres', password=''):
        cred = user + (':' + password if password else '')
        return '%s://%s@%s:%d/%s' % (scheme, cred, self.host, self.port, db)

    def wrong_password(self, db):
        # The throwaway cluster trusts loopback: a user that does not exist is
        # the credentials PostgreSQL refuses there.
        return self.url(db, 'postgresql', 'nobody', 'wrong')


def start_refused(argv, what, causes):
    """`allot serve` (argv) must stop at once, with exit status 1 and every
    one of `causes` in what it says."""
    argv = [a.replace('{port}', str(free_port())) for a in argv]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        check(False, '%s: allot serve stops' % what, 'it served')
        return
    ok = r.returncode == 1 and all(c in r.stderr for c in causes)
    check(ok, '%s: allot serve stops, naming %r' % (what, causes),
          'exit %s, stderr: %s' % (r.returncode, r.stderr[-1500:]))


def served_beside(db, args, work, conf, src, world):
    """The drop-in (docs/migrate.md): allot's database beside Placement's on
    the same MariaDB server, made with the documented SQL, found from the
    deployment's own placement.conf (Placement's, `conf`) with no --database,
    served only once imported into, and compared with the running Placement
    by `allot verify`; then, with that allot still serving, the way back
    (`way_back`)."""
    serve = [args.allot, 'serve', '--bind', '127.0.0.1:{port}',
             '--placement-conf', conf, '--log', 'warn']
    beside = src.replace('/placement_src?', '/allot?')
    db.admin('DROP DATABASE IF EXISTS allot')  # a server kept from a run before
    start_refused(serve, 'before allot\'s database exists',
                  ["allot's database", 'docs/migrate.md'])
    db.admin("CREATE DATABASE allot CHARACTER SET utf8mb4 COLLATE "
             "utf8mb4_nopad_bin; GRANT ALL PRIVILEGES ON allot.* TO "
             "'placement'@'%'")
    r = allot(args.allot, 'db', 'sync', '--placement-conf', conf)
    check(r.returncode == 0, 'allot db sync --placement-conf', r.stderr)
    start_refused(serve, 'while allot\'s database is empty',
                  ['holds 7 resource provider(s)',
                   'allot import --from-placement'])
    r = allot(args.allot, 'import', '--from-placement', src,
              '--database', beside)
    check(r.returncode == 0, 'import mariadb -> beside it', r.stderr)
    p = placement_api(args.venv, conf, os.path.join(work, 'beside-p.log'))
    a = None
    try:
        a = Server(serve, dict(os.environ), os.path.join(work, 'beside.log'))
        r = verify(args, p, a, 'beside Placement')
        check(r.returncode == 0, 'allot serving beside Placement, from '
              'placement.conf alone: allot verify finds no undocumented '
              'difference', r.stdout[-3000:] + r.stderr[-1000:])
        way_back(db, args, work, p, a, src, world)
    finally:
        for server in (a, p):
            if server:
                server.stop()


def verify(args, p, a, label):
    """`allot verify` of Placement (p) against allot (a), its summary printed
    after `label`."""
    r = allot(args.allot, 'verify',
              '--placement', 'http://127.0.0.1:%d' % p.port,
              '--allot', 'http://127.0.0.1:%d' % a.port)
    last = r.stdout.strip().splitlines()[-1:] or ['']
    print('%s: allot verify: %s' % (label, last[0]), flush=True)
    return r


def mysql(db, sql):
    """The `mysql` client as the database's administrator (docs/migrate.md's
    `mysql -e`, with the throwaway server's address)."""
    return subprocess.run(['mysql', '-h', db.host, '-P', str(db.port), '-u',
                           'root', '-N', '-e', sql], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)


def wait_writer(a):
    """On MariaDB a node writes only while it holds the writer's lease, which
    it takes within a tick of its start (/metrics says when)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, text = a.get('/metrics', '1.0')
        if status == 200 and re.search(r'^allot_cluster_writer 1$', text,
                                       re.M):
            return
        time.sleep(0.1)
    raise RuntimeError('allot took no writer\'s lease in 20 s')


def write_through_allot(a, world):
    """What allot's data gains after the switch, so that it differs from
    Placement's old database: a new provider with inventory and a consumer on
    it, an allocation changed, and the extensions Placement cannot hold (a
    pending claim, a server group). Returns what Placement must show after the
    way back."""
    wait_writer(a)
    rp, consumers = world['rp'], world['consumers']
    owner = {'project_id': world['projects'][0], 'user_id': world['user']}
    cn3, vm5 = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    a.ok('POST', '/resource_providers', body={'name': 'cn3', 'uuid': cn3})
    a.ok('PUT', '/resource_providers/%s/inventories' % cn3, body={
        'resource_provider_generation': 0, 'inventories': {
            'VCPU': {'total': 8}, 'MEMORY_MB': {'total': 8192}}})
    a.ok('PUT', '/allocations/' + vm5, body=dict(owner, allocations={
        cn3: {'resources': {'VCPU': 2, 'MEMORY_MB': 1024}}},
        consumer_generation=None, consumer_type='INSTANCE'))
    vm1 = consumers['vm1']
    gen = a.ok('GET', '/allocations/' + vm1)['consumer_generation']
    vm1_now = {rp['cn1']: {'resources': {'VCPU': 6, 'MEMORY_MB': 4096}},
               rp['ss1']: {'resources': {'DISK_GB': 40}}}
    a.ok('PUT', '/allocations/' + vm1, body=dict(
        owner, allocations=vm1_now, consumer_generation=gen,
        consumer_type='INSTANCE'))
    world['rp']['cn3'], world['consumers']['vm5'] = cn3, vm5
    claims = [a.ok('POST', '/claims', body=dict(
        owner, consumer_uuid=str(uuidlib.uuid4()), expires_in=3600,
        allocations={cn3: {'resources': {'VCPU': 1}}}))['uuid']
        for _ in range(2)]
    a.ok('POST', '/server_groups', body={
        'name': 'web', 'project_id': owner['project_id'],
        'policy': 'anti-affinity'})
    return {'cn3': cn3, 'vm5': vm5, 'vm1': vm1, 'vm1_now': vm1_now,
            'claims': claims}


def claims_end(args, a, wrote):
    """The way back's step 2: no claim left pending before the export (a live
    one holds capacity Placement would offer again): the first confirmed, as
    its client would, the second released with `allot claims release`."""
    url = ['--url', 'http://127.0.0.1:%d' % a.port]

    def pending():
        r = allot(args.allot, 'claims', 'list', '--state', 'pending',
                  '-f', 'json', *url)
        listed = json.loads(r.stdout) if r.returncode == 0 else {}
        return sorted(c['uuid'] for c in listed.get('claims', []))

    check(pending() == sorted(wrote['claims']), 'way back, step 2: allot '
          'claims list --state pending lists the live claims')
    first, second = wrote['claims']
    r = allot(args.allot, 'claims', 'confirm', first, *url)
    check(r.returncode == 0, 'way back, step 2: a claim confirmed', r.stderr)
    r = allot(args.allot, 'claims', 'release', second, *url)
    check(r.returncode == 0, 'way back, step 2: allot claims release',
          r.stderr)
    check(pending() == [], 'way back, step 2: allot claims list --state '
          'pending lists none')


def way_back(db, args, work, p, a, src, world):
    """docs/migrate.md, "The way back", step by step as written, while allot
    (a, serving the database beside Placement's) keeps serving until its step
    5: after writes through allot, Placement's database made empty again
    (mysqldump, the DROP/CREATE, placement-manage db sync), no claim left
    pending, allot's exported into it while allot serves (refused without
    --drop-extensions, naming the extensions), Placement started on it at its
    old port, and `allot verify` with both running; then allot stopped."""
    before = (passed, failed)
    try:
        walk_back(db, args, work, p, a, src, world)
    finally:
        print('way back (docs/migrate.md as written, allot serving until step '
              '5): %d passed, %d failed' % (passed - before[0],
                                            failed - before[1]), flush=True)


def walk_back(db, args, work, p, a, src, world):
    """`way_back`'s steps."""
    wrote = write_through_allot(a, world)
    name = 'placement_src'  # Placement's database here ("placement" there)
    beside = src.replace('/%s?' % name, '/allot?')
    # At the switch's step 5 Placement was stopped.
    p.stop()
    # Step 1: a copy, the database made empty again, Placement's schema.
    copy = os.path.join(work, 'placement-before-switch.sql')
    with open(copy, 'w') as fh:
        r = subprocess.run(['mysqldump', '-h', db.host, '-P', str(db.port),
                            '-u', 'root', name], stdout=fh,
                           stderr=subprocess.PIPE, text=True)
    with open(copy) as fh:
        kept = 'CREATE TABLE `resource_providers`' in fh.read()
    check(r.returncode == 0 and kept, 'way back, step 1: mysqldump keeps a '
          'copy of Placement\'s database', r.stderr)
    r = mysql(db, 'DROP DATABASE %s; CREATE DATABASE %s;' % (name, name))
    check(r.returncode == 0, 'way back, step 1: DROP DATABASE; CREATE '
          'DATABASE', r.stderr)
    r = subprocess.run([os.path.join(args.venv, 'bin', 'placement-manage'),
                        '--config-file', p.conf, 'db', 'sync'],
                       capture_output=True, text=True)
    check(r.returncode == 0, 'way back, step 1: placement-manage db sync as '
          'Placement\'s own user (its grants outlived the drop)', r.stderr)
    claims_end(args, a, wrote)
    export_back(db, args, src, beside, a, name)
    # Step 4: Placement on it, on its old port, and allot verify.
    p = placement_api(args.venv, p.conf, os.path.join(work, 'back-p.log'),
                      port=p.port)
    try:
        r = verify(args, p, a, 'way back, step 4')
        check(r.returncode == 0, 'way back, step 4: allot verify of '
              'Placement on the export against allot, still serving, finds '
              'no undocumented difference',
              r.stdout[-3000:] + r.stderr[-1000:])
        placement_holds(p, wrote)
        # Step 5: the endpoint moved back, allot stops (SIGTERM).
        a.stop()
        check(a.proc.returncode == 0, 'way back, step 5: allot stops on '
              'SIGTERM (exit %s)' % a.proc.returncode, a.tail())
    finally:
        p.stop()


def export_back(db, args, src, beside, a, name):
    """The way back's step 3, while allot (a) serves: refused without
    --drop-extensions, naming them and writing nothing; then done."""
    r = allot(args.allot, 'export', '--to-placement', src,
              '--database', beside)
    refused(r, '0 pending claim(s), 2 ended claim(s)', 'way back, step 3: '
            'the export without --drop-extensions')
    check('1 server group(s)' in r.stderr and 'nothing was written'
          in r.stderr, 'way back, step 3: the refusal names the server '
          'group and says nothing was written', r.stderr)
    r = mysql(db, 'SELECT COUNT(*) FROM %s.resource_providers' % name)
    check(r.stdout.strip() == '0', 'way back, step 3: the refused export '
          'wrote nothing', r.stdout + r.stderr)
    r = allot(args.allot, 'export', '--to-placement', src,
              '--database', beside, '--drop-extensions')
    check(r.returncode == 0, 'way back, step 3: allot export --to-placement '
          '--drop-extensions while allot serves', r.stderr)
    for line in r.stderr.strip().splitlines():
        print('way back, step 3: %s' % line, flush=True)
    status, _ = a.get('/resource_providers', '1.39')
    check(a.proc.poll() is None and status == 200, 'way back, step 3: allot '
          'kept serving through the export')


def placement_holds(p, wrote):
    """Placement, after the way back, answers with what was written through
    allot after the switch: a confirmed claim as its allocations."""
    inv = p.ok('GET', '/resource_providers/%s/inventories' % wrote['cn3'])
    check({k: v['total'] for k, v in inv['inventories'].items()}
          == {'VCPU': 8, 'MEMORY_MB': 8192}, 'way back, step 4: Placement '
          'has the provider made through allot, with its inventory',
          json.dumps(inv))
    got = p.ok('GET', '/allocations/' + wrote['vm1'])['allocations']
    check({k: v['resources'] for k, v in got.items()}
          == {k: v['resources'] for k, v in wrote['vm1_now'].items()},
          'way back, step 4: Placement has the allocation changed through '
          'allot', json.dumps(got))
    usages = p.ok('GET', '/resource_providers/%s/usages' % wrote['cn3'])
    check(usages['usages'] == {'VCPU': 3, 'MEMORY_MB': 1024}, 'way back, '
          'step 4: Placement has the consumer made through allot and the '
          'claim confirmed there, not the one released', json.dumps(usages))


def run_backend(db, args, work):
    print('== %s' % db.name, flush=True)
    src = db.fresh('placement_src')
    if isinstance(db, MariaDB):
        src = db.service_user('placement_src')
    p = placement(args.venv, src, work, db.name + '-placement')
    try:
        world = build_world(p)
        expected = answers(p, world)
        cn1 = world['rp']['cn1']
        cached_gen = p.ok('GET', '/resource_providers/' + cn1)['generation']
    finally:
        p.stop()
    run_checks(db, args, work, src, world, expected, cached_gen)
    if isinstance(db, MariaDB):
        # Last: its way back replaces Placement's database, which the checks
        # above import from and compare with.
        try:
            served_beside(db, args, work, p.conf, src, world)
        except Exception as e:  # a broken step fails, and the rest runs
            check(False, 'served beside: %s: %s' % (type(e).__name__, e))


def run_checks(db, args, work, src, world, expected, cached_gen):
    """Steps 1 to 3 and 5 of the module's list, on Placement's database
    (`src`) as the world left it."""
    cn1 = world['rp']['cn1']
    targets = [('sqlite', 'sqlite:%s/%s.db' % (work, db.name))]
    if isinstance(db, Postgres):
        db.fresh('allot_target')
        targets.append(('postgresql', db.url('allot_target', 'postgres')))
    plain = src.replace('+pymysql', '').replace('+psycopg2', '')
    for label, target in targets:
        r = allot(args.allot, 'import', '--from-placement',
                  src if label == 'sqlite' else plain, '--database', target)
        check(r.returncode == 0, 'import %s -> %s' % (db.name, label),
              r.stderr)
        print(r.stderr.strip().splitlines()[-1] if r.stderr else '',
              flush=True)
        a = allot_serve(args.allot, target, work, '%s-%s' % (db.name, label))
        try:
            compare(expected, a, world, 'allot on %s from %s'
                    % (label, db.name))
            # Nova's cached generation, read before the switch.
            status, text = a.request(
                'PUT', '/resource_providers/%s/traits' % cn1, '1.39',
                {'resource_provider_generation': cached_gen,
                 'traits': ['HW_CPU_X86_AVX2', 'CUSTOM_FAST',
                            'CUSTOM_RACK_1']})
            check(status == 200, 'a write with the generation read from '
                  'Placement before the switch succeeds', text)
        finally:
            a.stop()
        r = allot(args.allot, 'import', '--from-placement', src,
                  '--database', target)
        refused(r, 'not empty', 'an import into a non-empty target')

    # The way back: the first (unwritten-to) allot database goes back into a
    # fresh Placement database, which Placement then serves alike.
    back_db = os.path.join(work, db.name + '-back.db')
    r = allot(args.allot, 'import', '--from-placement', src,
              '--database', 'sqlite:' + back_db)
    check(r.returncode == 0, 'import for the way back', r.stderr)
    back = db.fresh('placement_back')
    conf = os.path.join(work, db.name + '-sync.conf')
    with open(conf, 'w') as fh:
        fh.write('[placement_database]\nconnection = %s\n' % back)
    db_sync(args.venv, conf)
    r = allot(args.allot, 'export', '--database', 'sqlite:' + back_db,
              '--to-placement', back)
    check(r.returncode == 0, 'export %s' % db.name, r.stderr)
    p = placement(args.venv, back, work, db.name + '-back')
    try:
        compare(expected, p, world, 'Placement on the exported %s' % db.name)
    finally:
        p.stop()
    r = allot(args.allot, 'export', '--database', 'sqlite:' + back_db,
              '--to-placement', back)
    refused(r, 'not empty', 'an export into a non-empty Placement database')

    # The refusals, each writing nothing.
    nothing = os.path.join(work, db.name + '-nothing.db')
    bad = db.fresh('placement_bad')
    with open(conf, 'w') as fh:
        fh.write('[placement_database]\nconnection = %s\n' % bad)
    db_sync(args.venv, conf)
    if isinstance(db, MariaDB):
        db.admin("USE placement_bad; UPDATE alembic_version SET "
                 "version_num = 'ffffffffffff'")
    else:
        db.admin("UPDATE alembic_version SET version_num = 'ffffffffffff'",
                 db='placement_bad')
    cases = [
        (bad, 'unsupported Placement schema revision ffffffffffff',
         'an unsupported revision'),
        (db.wrong_password('placement_src'),
         'Access denied' if isinstance(db, MariaDB) else 'nobody',
         'wrong credentials'),
        (re.sub(r':\d+/', ':%d/' % free_port(), src), 'connecting to',
         'an unreachable host'),
        ('mysql+pymysql://root@127.0.0.1', 'names no database', 'a bad URL'),
        ('oracle://x@h/placement', 'scheme', 'a bad URL scheme'),
    ]
    for url, cause, what in cases:
        r = allot(args.allot, 'import', '--from-placement', url,
                  '--database', 'sqlite:' + nothing)
        refused(r, cause, what)
        check(not os.path.exists(nothing), '%s writes nothing' % what)

    # A host that takes the TCP connection but never answers (the kernel
    # completes the handshake for a listening socket nobody accepts on): the
    # import gives up after --connect-timeout, not after the OS's minutes.
    with socket.socket() as silent:
        silent.bind(('127.0.0.1', 0))
        silent.listen(0)
        url = re.sub(r':\d+/', ':%d/' % silent.getsockname()[1], src)
        started = time.monotonic()
        r = allot(args.allot, 'import', '--from-placement', url,
                  '--connect-timeout', '2', '--database', 'sqlite:' + nothing)
        took = time.monotonic() - started
    refused(r, 'no answer in 2s', 'a host that never answers')
    check(took < 15, 'a host that never answers fails within '
          '--connect-timeout (took %.1fs)' % took)
    check(not os.path.exists(nothing), 'a host that never answers writes '
          'nothing')


def bench_seed(args):
    """scripts/placement-import --bench: the `flat` shape of BENCHMARKS.md with
    its standing load, seeded through Placement's API by `allot bench seed` into
    database `placement` of the MariaDB given (made by `placement-manage db
    sync` first). Resumable: the seed keeps what exists."""
    db = MariaDB(args.mariadb)
    db.admin('CREATE DATABASE IF NOT EXISTS placement CHARACTER SET utf8mb4')
    url = db.url('placement', 'mysql+pymysql') + '?charset=utf8'
    with tempfile.TemporaryDirectory(prefix='allot-placement-bench-') as work:
        # Several workers: the seed sends --concurrency requests at once.
        p = placement(args.venv, url, work, 'placement', workers=8)
        try:
            subprocess.run([args.allot, 'bench', 'seed', '--shape', 'flat',
                            '--roots', str(args.bench_seed), '--url',
                            'http://127.0.0.1:%d' % p.port,
                            '--concurrency', '8'], check=True)
        finally:
            p.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--allot', required=True)
    ap.add_argument('--venv', required=True)
    ap.add_argument('--mariadb')
    ap.add_argument('--postgres')
    ap.add_argument('--bench-seed', type=int, metavar='ROOTS',
                    help='seed the flat shape into MariaDB instead of testing')
    args = ap.parse_args()
    if args.bench_seed:
        return bench_seed(args)
    backends = []
    if args.mariadb:
        backends.append(MariaDB(args.mariadb))
    if args.postgres:
        backends.append(Postgres(args.postgres))
    check(bool(backends), 'at least one database to test on')
    with tempfile.TemporaryDirectory(prefix='allot-placement-import-') as work:
        for db in backends:
            try:
                run_backend(db, args, work)
            except Exception as e:  # a broken step fails the run, loudly
                check(False, '%s: %s: %s' % (db.name, type(e).__name__, e))
    print('placement-import: %d passed, %d failed' % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
