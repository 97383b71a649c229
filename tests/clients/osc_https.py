"""The ``openstack`` CLI (python-openstackclient with osc-placement) against allot
over HTTPS: what an operator types, with the CA that verifies allot's certificate
(``--os-cacert``) and ``admin_token`` auth, so that no Keystone is needed. Each step
runs real commands and asserts on their output; a certificate the CLI cannot verify
must be refused. The last line is ``N passed, N failed``.

Usage: osc_https.py OPENSTACK URL CACERT (scripts/clients starts allot with a
certificate made by scripts/test-ca and passes its https:// URL and the CA).
"""

import json
import subprocess
import sys
import uuid

from steps import step, summary


def main(openstack, url, cacert):
    common = ['--os-auth-type', 'admin_token', '--os-endpoint', url,
              '--os-token', 'admin', '--os-placement-api-version', '1.39']

    def osc(*args, cacert=cacert, check=True):
        ca = ['--os-cacert', cacert] if cacert else []
        done = subprocess.run([openstack, *common, *ca, *args],
                              capture_output=True, text=True, timeout=120)
        if check:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    def osc_json(*args):
        return json.loads(osc(*args, '-f', 'json').stdout)

    name = 'cn-osc-' + uuid.uuid4().hex[:8]
    state = {}

    @step('resource provider create over HTTPS')
    def _():
        rp = osc_json('resource', 'provider', 'create', name)
        assert rp['name'] == name, rp
        state['uuid'] = rp['uuid']

    @step('resource provider inventory set and list')
    def _():
        osc('resource', 'provider', 'inventory', 'set', state['uuid'],
            '--resource', 'VCPU=16', '--resource', 'MEMORY_MB=32768')
        inventories = {i['resource_class']: i['total'] for i in
                       osc_json('resource', 'provider', 'inventory', 'list',
                                state['uuid'])}
        assert inventories == {'VCPU': 16, 'MEMORY_MB': 32768}, inventories

    @step('allocation candidate list finds the provider')
    def _():
        candidates = osc_json('allocation', 'candidate', 'list',
                              '--resource', 'VCPU=4')
        assert any(c['resource provider'] == state['uuid'] for c in candidates), \
            candidates

    @step('resource provider list and delete')
    def _():
        names = [p['name'] for p in osc_json('resource', 'provider', 'list')]
        assert name in names, names
        osc('resource', 'provider', 'delete', state['uuid'])
        names = [p['name'] for p in osc_json('resource', 'provider', 'list')]
        assert name not in names, names

    @step('without the CA the certificate is refused')
    def _():
        done = osc('resource', 'provider', 'list', cacert=None, check=False)
        assert done.returncode != 0, done.stdout
        assert 'CERTIFICATE_VERIFY_FAILED' in done.stderr or \
            'certificate verify failed' in done.stderr, done.stderr

    return summary()


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit('usage: osc_https.py OPENSTACK URL CACERT')
    sys.exit(main(*sys.argv[1:]))
