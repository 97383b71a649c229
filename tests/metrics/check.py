"""`/metrics` read by prometheus_client's own parser (issue 23), run by
scripts/metrics: allot serves a small cloud made through its API (nested and
sharing providers, several classes, allocations and a pending claim); the
exposition must parse as the Prometheus text format, and openstack-exporter's
Placement series must equal, for every provider and class, what the API reports
(`GET /resource_providers/{uuid}/inventories` and `/usages`), with the same
names, labels and meaning, and no other provider or class.

    python check.py ALLOT_BIN

Prints `metrics: N passed, N failed` last; exit status 1 if anything failed.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid as uuidlib

from prometheus_client.parser import text_string_to_metric_families

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
        'x-auth-token': 'admin', 'openstack-api-version': 'placement latest',
        'content-type': 'application/json', 'accept': 'application/json'})
    try:
        with urllib.request.urlopen(req) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def main(allot):
    work = tempfile.mkdtemp(prefix='allot-metrics-')
    api, scrape = free_port(), free_port()
    proc = subprocess.Popen(
        [allot, 'serve', '--database', 'sqlite:%s/a.db' % work,
         '--bind', '127.0.0.1:%d' % api, '--metrics-bind', '127.0.0.1:%d' % scrape],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = 'http://127.0.0.1:%d' % api
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + '/').read()
                break
            except OSError:
                time.sleep(0.1)
        # A compute node with two NUMA children, a sharing disk pool, a plain host.
        ids = {}
        def provider(name, parent=None, inventories=None):
            u = str(uuidlib.uuid4())
            body = {'name': name, 'uuid': u}
            if parent:
                body['parent_provider_uuid'] = ids[parent]
            status, out = call(base, 'POST', '/resource_providers', body)
            assert status == 200, out
            ids[name] = u
            if inventories:
                status, out = call(base, 'PUT', '/resource_providers/%s/inventories' % u,
                                   {'resource_provider_generation': 0,
                                    'inventories': inventories})
                assert status == 200, out
        provider('cn1', inventories={'VCPU': {'total': 32, 'allocation_ratio': 16.0},
                                     'MEMORY_MB': {'total': 65536, 'reserved': 512,
                                                   'allocation_ratio': 1.5}})
        provider('cn1_numa0', 'cn1', {'PCPU': {'total': 8}})
        provider('cn1_numa1', 'cn1', {'PCPU': {'total': 8, 'reserved': 2}})
        provider('pool', inventories={'DISK_GB': {'total': 2000, 'reserved': 100}})
        provider('cn2', inventories={'VCPU': {'total': 8}})
        status, out = call(base, 'PUT', '/resource_classes/CUSTOM_FPGA_X')
        provider('accel', inventories={'CUSTOM_FPGA_X': {'total': 4}})
        for i, (rp, res) in enumerate([
                ('cn1', {'VCPU': 4, 'MEMORY_MB': 2048}),
                ('cn1_numa0', {'PCPU': 2}),
                ('pool', {'DISK_GB': 40}),
                ('cn1', {'VCPU': 1})]):
            consumer = str(uuidlib.uuid4())
            status, out = call(base, 'PUT', '/allocations/%s' % consumer, {
                'allocations': {ids[rp]: {'resources': res}}, 'project_id': 'p',
                'user_id': 'u', 'consumer_generation': None,
                'consumer_type': 'INSTANCE'})
            assert status == 204, out
        status, out = call(base, 'POST', '/claims', {
            'consumer_uuid': str(uuidlib.uuid4()), 'project_id': 'p', 'user_id': 'u',
            'allocations': {ids['cn2']: {'resources': {'VCPU': 3}}}})
        assert status == 201, out

        with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % scrape) as r:
            check(r.headers['content-type'] == 'text/plain; version=0.0.4; charset=utf-8',
                  'content type: %s' % r.headers['content-type'])
            text = r.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        check(families['openstack_placement_up'].samples[0].value == 1, 'up')
        for metric in ('total', 'allocation_ratio', 'reserved', 'usage'):
            name = 'openstack_placement_resource_' + metric
            fam = families.get(name)
            check(fam is not None and fam.type == 'gauge', '%s is a gauge' % name)
            got = {(s.labels['hostname'], s.labels['resourcetype']): s.value
                   for s in fam.samples}
            check(all(set(s.labels) == {'hostname', 'resourcetype'} for s in fam.samples),
                  '%s labels' % name)
            want = {}
            for rp, u in ids.items():
                _, inv = call(base, 'GET', '/resource_providers/%s/inventories' % u)
                _, use = call(base, 'GET', '/resource_providers/%s/usages' % u)
                for rc, fields in inv['inventories'].items():
                    want[(rp, rc)] = (use['usages'][rc] if metric == 'usage'
                                      else fields[metric])
            check(got == want, '%s: got %s, the API says %s' % (name, got, want))
        # The same four summed by class, as a parser reads them.
        sums = {}
        for rp, u in ids.items():
            _, inv = call(base, 'GET', '/resource_providers/%s/inventories' % u)
            _, use = call(base, 'GET', '/resource_providers/%s/usages' % u)
            for rc, fields in inv['inventories'].items():
                capacity = int((fields['total'] - fields['reserved'])
                               * fields['allocation_ratio'])
                row = sums.setdefault(rc, {'total': 0, 'reserved': 0, 'capacity': 0,
                                           'usage': 0})
                row['total'] += fields['total']
                row['reserved'] += fields['reserved']
                row['capacity'] += capacity
                row['usage'] += use['usages'][rc]
        for metric in ('total', 'reserved', 'capacity', 'usage'):
            name = 'allot_resource_' + metric
            fam = families.get(name)
            check(fam is not None and fam.type == 'gauge', '%s is a gauge' % name)
            got = {s.labels['resourcetype']: s.value for s in fam.samples}
            want = {rc: row[metric] for rc, row in sums.items()}
            check(got == want, '%s: got %s, the API sums to %s' % (name, got, want))
        check(families['allot_metrics_provider_series'].samples[0].value == 1,
              'the series per provider are written for a small cloud')
        pend = families['allot_pending']
        check({s.labels['resourcetype']: s.value for s in pend.samples} == {'VCPU': 3},
              'pending by class: %s' % pend.samples)
        check(families['allot_claims'].type == 'counter', 'allot_claims is a counter')
        check(families['allot_http_request_duration_seconds'].type == 'histogram',
              'latency is a histogram')
        check(families['process_resident_memory_bytes'].samples[0].value > 0, 'rss')
    finally:
        proc.terminate()
        proc.wait(30)
    print('metrics: %d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
