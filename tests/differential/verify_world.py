"""`allot verify` against the real OpenStack Placement (issue 22).

One world is made, call for call, through the API of a stock Placement 16.0.0
and of allot (servers.py: SQLite, noauth2, the same legacy rules): a compute
node with two NUMA children, a second compute node, a sharing storage
provider in an aggregate with both, custom classes and traits, consumers of
several types (one on three providers, one whose allocations were deleted,
one moved between hosts). Then `allot verify --placement P --allot A` must
print `identical` (or only documented differences) and exit 0; then one
inventory is changed on allot alone, and it must name that difference and
exit 1. What is checked is the verifier, on answers of the real Placement.

    python3 tests/differential/verify_world.py [--placement-venv DIR]
        [--allot-bin PATH]

scripts/differential --ci runs it (ALLOT_DIFFERENTIAL_VENV, ALLOT_BIN).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True

from servers import Server, add_server_args  # noqa: E402

CN1 = 'c0000000-0000-4000-8000-000000000001'
CN2 = 'c0000000-0000-4000-8000-000000000002'
NUMA0 = 'c0000000-0000-4000-8000-000000000010'
NUMA1 = 'c0000000-0000-4000-8000-000000000011'
SS = 'c0000000-0000-4000-8000-000000000020'
AGG = 'a0000000-0000-4000-8000-000000000001'
VM1 = 'e0000000-0000-4000-8000-000000000001'
VM2 = 'e0000000-0000-4000-8000-000000000002'
VM3 = 'e0000000-0000-4000-8000-000000000003'
MIG = 'e0000000-0000-4000-8000-000000000004'


def world():
    """The calls, each (method, path, body, microversion)."""
    rp = '/resource_providers'
    calls = [
        ('PUT', '/resource_classes/CUSTOM_FPGA', None, '1.7'),
        ('PUT', '/traits/CUSTOM_RACK_A', None, '1.6'),
    ]
    for uuid, name, parent in [(CN1, 'cn1', None), (NUMA0, 'cn1-numa0', CN1),
                               (NUMA1, 'cn1-numa1', CN1), (CN2, 'cn2', None),
                               (SS, 'storage', None)]:
        body = {'uuid': uuid, 'name': name}
        if parent:
            body['parent_provider_uuid'] = parent
        calls.append(('POST', rp, body, '1.20'))

    def inv(uuid, gen, inventories):
        calls.append(('PUT', '%s/%s/inventories' % (rp, uuid),
                      {'resource_provider_generation': gen,
                       'inventories': inventories}, '1.39'))

    inv(CN1, 0, {'VCPU': {'total': 32, 'allocation_ratio': 4.0},
                 'MEMORY_MB': {'total': 4096, 'reserved': 512}})
    inv(NUMA0, 0, {'VCPU': {'total': 16}, 'MEMORY_MB': {'total': 65536,
                                                         'step_size': 256}})
    inv(NUMA1, 0, {'VCPU': {'total': 16}, 'CUSTOM_FPGA': {'total': 2,
                                                          'max_unit': 1}})
    inv(CN2, 0, {'VCPU': {'total': 8}, 'MEMORY_MB': {'total': 16384}})
    inv(SS, 0, {'DISK_GB': {'total': 2000, 'reserved': 100,
                            'allocation_ratio': 1.5}})
    calls += [
        ('PUT', '%s/%s/traits' % (rp, CN1),
         {'resource_provider_generation': 1,
          'traits': ['HW_CPU_X86_AVX2', 'CUSTOM_RACK_A']}, '1.39'),
        ('PUT', '%s/%s/traits' % (rp, SS),
         {'resource_provider_generation': 1,
          'traits': ['MISC_SHARES_VIA_AGGREGATE']}, '1.39'),
    ]
    for uuid, gen in [(CN1, 2), (CN2, 1), (SS, 2)]:
        calls.append(('PUT', '%s/%s/aggregates' % (rp, uuid),
                      {'resource_provider_generation': gen,
                       'aggregates': [AGG]}, '1.39'))

    def alloc(consumer, allocations, project, ctype, gen=None):
        calls.append(('PUT', '/allocations/%s' % consumer,
                      {'allocations': {u: {'resources': r}
                                       for u, r in allocations.items()},
                       'project_id': project, 'user_id': 'u-' + project,
                       'consumer_generation': gen,
                       'consumer_type': ctype}, '1.39'))

    alloc(VM1, {NUMA0: {'VCPU': 4, 'MEMORY_MB': 2048},
                NUMA1: {'CUSTOM_FPGA': 1}, SS: {'DISK_GB': 100}},
          'p1', 'INSTANCE')
    alloc(VM2, {CN2: {'VCPU': 2, 'MEMORY_MB': 1024}}, 'p1', 'INSTANCE')
    alloc(VM3, {CN1: {'VCPU': 1}}, 'p2', 'MIGRATION')
    calls.append(('DELETE', '/allocations/%s' % VM3, None, '1.39'))
    alloc(MIG, {CN2: {'VCPU': 1}}, 'p2', 'MIGRATION')
    alloc(MIG, {CN1: {'VCPU': 1}}, 'p2', 'MIGRATION', gen=1)
    return calls


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_args(p, repo)
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix='allot-verify-')
    placement = Server('placement', 'placement', work,
                       placement_venv=args.placement_venv)
    allot = Server('allot', 'allot', work, allot_bin=args.allot_bin)
    failed = []
    try:
        starts = [threading.Thread(target=s.start) for s in (placement, allot)]
        for t in starts:
            t.start()
        for t in starts:
            t.join()
        for method, path, body, version in world():
            answers = [s.request(method, path, body, version)
                       for s in (placement, allot)]
            statuses = [a.status for a in answers]
            if statuses[0] != statuses[1] or statuses[0] >= 300:
                print('verify_world: %s %s: %s' % (method, path, statuses))
                return 1

        def verify():
            out = subprocess.run(
                [args.allot_bin, 'verify',
                 '--placement', 'http://127.0.0.1:%d' % placement.port,
                 '--allot', 'http://127.0.0.1:%d' % allot.port],
                capture_output=True, text=True,
                env=dict(os.environ, ALLOT_TOKEN='admin',
                         ALLOT_PLACEMENT_TOKEN='admin'))
            sys.stdout.write(out.stdout)
            sys.stdout.write(out.stderr)
            return out

        out = verify()
        if out.returncode != 0 or not ('identical: all' in out.stdout or
                                       ' 0 undocumented' in out.stdout):
            failed.append('the same world is not verified alike')
        path = '/resource_providers/%s/inventories/DISK_GB' % SS
        body = allot.request('GET', path).body
        body['total'] = 3000
        r = allot.request('PUT', path, body)
        if r.status != 200:
            failed.append('changing the inventory on allot: %s' % r.status)
        out = verify()
        wanted = '/inventories/DISK_GB/total: 2000 (placement) vs 3000 (allot)'
        if out.returncode == 0 or wanted not in out.stdout:
            failed.append('a changed inventory is not reported')
    finally:
        for server in (placement, allot):
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for f in failed:
        print('verify_world: FAILED: %s' % f)
    print('verify_world: %s' % ('failed' if failed else 'ok'))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
