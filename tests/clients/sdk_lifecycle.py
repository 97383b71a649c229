"""A compute node's life in Placement, driven through openstacksdk against allot.

What Nova's report client does for a host, through openstacksdk's placement proxy
(``conn.placement``) with ``admin_token`` auth and an endpoint override, so that no
Keystone is needed: create the provider, set its inventories, traits and aggregates,
ask for allocation candidates, claim one, read usages, drop the claim, delete the
provider; and one error, whose SDK exception must carry the request id. Every step
asserts; the last line is ``N passed, N failed``.

Usage: sdk_lifecycle.py URL [CACERT] (scripts/clients starts allot and passes its
URL; for an https:// URL, the CA file that verifies allot's certificate).
"""

import sys
import uuid

import openstack
from openstack import exceptions

from steps import step, summary

VERSION = '1.39'


def main(url, cacert=None):
    conn = openstack.connection.Connection(
        auth_type='admin_token',
        auth={'endpoint': url, 'token': 'admin'},
        placement_endpoint_override=url,
        placement_api_version=VERSION,
        cacert=cacert,
    )
    placement = conn.placement
    # The raw session, for calls the proxy has no method for; always at VERSION.
    hdrs = {'OpenStack-API-Version': 'placement %s' % VERSION}
    rp_uuid = str(uuid.uuid4())
    consumer = str(uuid.uuid4())
    project, user = str(uuid.uuid4()), str(uuid.uuid4())
    aggregate = str(uuid.uuid4())
    state = {}

    @step('create the compute node provider')
    def _():
        rp = placement.create_resource_provider(name='cn-sdk-' + rp_uuid[:8], id=rp_uuid)
        assert rp.id == rp_uuid, rp
        assert rp.name == 'cn-sdk-' + rp_uuid[:8], rp
        got = placement.get_resource_provider(rp_uuid)
        assert got.generation == 0, got
        state['generation'] = got.generation

    @step('Location of a created provider is absolute')
    def _():
        # 1.0 to 1.19 answer a create with 201 and a Location, no body.
        r = placement.post('/resource_providers', json={'name': 'cn-loc2'},
                           headers={'OpenStack-API-Version': 'placement 1.0'})
        assert r.status_code == 201, r.status_code
        loc = r.headers['Location']
        assert loc.startswith(url + '/resource_providers/'), (loc, url)
        placement.delete_resource_provider(loc.rsplit('/', 1)[1],
                                           ignore_missing=False)

    @step('set inventories')
    def _():
        rp = placement.set_resource_provider_inventories(
            rp_uuid,
            inventories={
                'VCPU': {'total': 16, 'allocation_ratio': 4.0},
                'MEMORY_MB': {'total': 65536, 'reserved': 2048},
                'DISK_GB': {'total': 500},
            },
            resource_provider_generation=state['generation'])
        assert rp.generation == state['generation'] + 1, rp.generation
        state['generation'] = rp.generation
        invs = {i.resource_class: i
                for i in placement.resource_provider_inventories(rp_uuid)}
        assert sorted(invs) == ['DISK_GB', 'MEMORY_MB', 'VCPU'], sorted(invs)
        assert invs['VCPU'].total == 16, invs['VCPU']
        assert invs['VCPU'].allocation_ratio == 4.0, invs['VCPU']
        assert invs['MEMORY_MB'].reserved == 2048, invs['MEMORY_MB']

    @step('set traits')
    def _():
        placement.create_trait('CUSTOM_SDK_GOLD')
        names = [t.name for t in placement.traits(name='startswith:CUSTOM_SDK')]
        assert names == ['CUSTOM_SDK_GOLD'], names
        r = placement.put(
            '/resource_providers/%s/traits' % rp_uuid, headers=hdrs,
            json={'resource_provider_generation': state['generation'],
                  'traits': ['HW_CPU_X86_AVX2', 'CUSTOM_SDK_GOLD']})
        assert r.status_code == 200, (r.status_code, r.text)
        body = r.json()
        assert sorted(body['traits']) == ['CUSTOM_SDK_GOLD', 'HW_CPU_X86_AVX2']
        state['generation'] = body['resource_provider_generation']

    @step('set aggregates')
    def _():
        rp = placement.get_resource_provider(rp_uuid)
        assert rp.generation == state['generation'], rp.generation
        rp = placement.set_resource_provider_aggregates(rp, aggregate)
        assert rp.aggregates == [aggregate], rp.aggregates
        got = placement.fetch_resource_provider_aggregates(rp_uuid)
        assert got.aggregates == [aggregate], got.aggregates
        state['generation'] = got.generation

    @step('list providers by trait and aggregate')
    def _():
        found = [rp.id for rp in placement.resource_providers(
            required='CUSTOM_SDK_GOLD', member_of=aggregate)]
        assert found == [rp_uuid], found
        none = list(placement.resource_providers(required='!CUSTOM_SDK_GOLD'))
        assert rp_uuid not in [rp.id for rp in none]

    @step('allocation candidates')
    def _():
        cands = list(placement.allocation_candidates(
            resources='VCPU:2,MEMORY_MB:4096,DISK_GB:20',
            required='HW_CPU_X86_AVX2', member_of=aggregate))
        assert len(cands) == 1, cands
        allocs = cands[0].allocations
        assert list(allocs) == [rp_uuid], allocs
        assert allocs[rp_uuid]['resources'] == {
            'VCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 20}, allocs
        summaries = cands[0].provider_summaries
        assert summaries[rp_uuid]['resources']['VCPU']['capacity'] == 64
        state['claim'] = allocs
        too_big = list(placement.allocation_candidates(resources='VCPU:65'))
        assert too_big == [], too_big

    @step('claim the allocation')
    def _():
        placement.update_allocation(
            consumer, allocations=state['claim'], project_id=project,
            user_id=user, consumer_generation=None, consumer_type='INSTANCE')
        got = placement.get_allocation(consumer)
        assert got.allocations[rp_uuid]['resources']['VCPU'] == 2, got
        assert got.consumer_generation == 1, got.consumer_generation
        state['consumer_generation'] = got.consumer_generation

    @step('claim again through the raw session (PUT /allocations)')
    def _():
        r = placement.put(
            '/allocations/%s' % consumer, headers=hdrs,
            json={'allocations': {rp_uuid: {'resources': {
                'VCPU': 4, 'MEMORY_MB': 4096, 'DISK_GB': 20}}},
                'project_id': project, 'user_id': user,
                'consumer_generation': state['consumer_generation'],
                'consumer_type': 'INSTANCE'})
        assert r.status_code == 204, (r.status_code, r.text)

    @step('read usages')
    def _():
        rp = placement.fetch_resource_provider_usages(rp_uuid)
        assert rp.usages == {'VCPU': 4, 'MEMORY_MB': 4096, 'DISK_GB': 20}, \
            rp.usages
        usages = list(placement.usages(project))
        assert len(usages) == 1, usages
        assert usages[0].consumer_type == 'INSTANCE', usages[0]
        assert usages[0].consumer_count == 1, usages[0]
        assert usages[0].resources == {
            'VCPU': 4, 'MEMORY_MB': 4096, 'DISK_GB': 20}, usages[0]

    @step('remove the claim')
    def _():
        placement.delete_allocation(consumer, ignore_missing=False)
        rp = placement.fetch_resource_provider_usages(rp_uuid)
        assert rp.usages == {'VCPU': 0, 'MEMORY_MB': 0, 'DISK_GB': 0}, \
            rp.usages
        r = placement.get('/allocations/%s' % consumer, headers=hdrs)
        assert r.status_code == 200 and r.json()['allocations'] == {}, r.text

    @step('delete the provider')
    def _():
        placement.delete_resource_provider(rp_uuid, ignore_missing=False)
        try:
            placement.get_resource_provider(rp_uuid)
        except exceptions.NotFoundException:
            pass
        else:
            raise AssertionError('the provider is still there')

    @step('an error carries the request id')
    def _():
        try:
            placement.get_resource_provider(str(uuid.uuid4()))
        except exceptions.NotFoundException as e:
            assert e.request_id and e.request_id.startswith('req-'), \
                e.request_id
            assert e.response.headers['x-openstack-request-id'] == \
                e.request_id
            assert e.response.json()['errors'][0]['request_id'] == \
                e.request_id
        else:
            raise AssertionError('no error for an unknown provider')

    @step('a successful response carries the request id')
    def _():
        r = placement.get('/resource_providers', headers=hdrs)
        rid = r.headers.get('x-openstack-request-id', '')
        assert rid.startswith('req-'), dict(r.headers)
        assert r.headers['openstack-request-id'] == rid

    @step('the default policy: an admin without the service role may not reshape')
    def _():
        # Placement 16 as installed (enforce_new_defaults = True) answers 403.
        r = placement.post('/reshaper', headers=hdrs,
                           json={'inventories': {}, 'allocations': {}})
        assert r.status_code == 403, (r.status_code, r.text)
        assert 'placement:reshaper:reshape' in r.text, r.text

    return summary()


if __name__ == '__main__':
    if len(sys.argv) not in (2, 3):
        sys.exit('usage: sdk_lifecycle.py URL [CACERT]')
    sys.exit(main(sys.argv[1].rstrip('/'), *sys.argv[2:]))
