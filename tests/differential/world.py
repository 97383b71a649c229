"""Random worlds: the HTTP calls that build one, and a model to aim queries at.

Everything is drawn from one `random.Random`, so a (seed, world index) pair
always gives the same calls, uuids and names on both servers.

A world is small on purpose (a few trees of at most three levels, a couple of
sharing providers, a handful of consumers) so that full allocation candidate
answers stay small.
"""

import uuid as uuidlib

# Placeholders inside request bodies, resolved per server just before sending:
# the provider's (or consumer's) current generation on *that* server. They keep
# a recorded call sequence replayable after calls are dropped while shrinking.
GEN = '$GEN:'
CGEN = '$CGEN:'


class Call:
    """One HTTP request. `body` may hold GEN/CGEN placeholders."""

    __slots__ = ('method', 'path', 'body', 'version', 'kind')

    def __init__(self, method, path, body=None, version='1.39', kind='world'):
        self.method = method
        self.path = path
        self.body = body
        self.version = version
        self.kind = kind

    def __repr__(self):
        return 'Call(%s %s @%s)' % (self.method, self.path, self.version)


STD_CLASSES_ROOT = ['VCPU', 'MEMORY_MB', 'DISK_GB']
STD_CLASSES_LEAF = ['SRIOV_NET_VF', 'NET_BW_EGR_KILOBIT_PER_SEC',
                    'NET_BW_IGR_KILOBIT_PER_SEC', 'PCI_DEVICE', 'VGPU']
STD_CLASSES_SHARED = ['DISK_GB', 'IPV4_ADDRESS']
SCALE = {'MEMORY_MB': 256, 'DISK_GB': 10, 'NET_BW_EGR_KILOBIT_PER_SEC': 1000,
         'NET_BW_IGR_KILOBIT_PER_SEC': 1000}
STD_TRAITS = ['HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE', 'HW_CPU_X86_AVX512F',
              'STORAGE_DISK_SSD', 'HW_NIC_SRIOV', 'COMPUTE_VOLUME_MULTI_ATTACH',
              'HW_NIC_OFFLOAD_TSO']
NUMA = 'HW_NUMA_ROOT'
SHARES = 'MISC_SHARES_VIA_AGGREGATE'
RATIOS = [1.0, 1.0, 1.0, 1.5, 2.0, 4.0, 16.0, 0.5]


class Provider:
    def __init__(self, uuid, name, parent, root, depth, sharing=False):
        self.uuid = uuid
        self.name = name
        self.parent = parent
        self.root = root
        self.depth = depth
        self.sharing = sharing
        self.inv = {}
        self.traits = set()
        self.aggs = set()


class World:
    def __init__(self, rng, allocations=True):
        self.rng = rng
        self.allocations = allocations
        self.tag = '%04X' % rng.getrandbits(16)
        self.calls = []
        self.providers = []
        self.by_uuid = {}
        self.custom_rcs = []
        self.custom_traits = []
        self.aggs = []
        self.projects = [self.uuid(), self.uuid()]
        self.users = [self.uuid(), self.uuid()]
        self.consumers = {}

    # -- helpers -----------------------------------------------------------

    def uuid(self):
        return str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))

    def call(self, method, path, body=None, version='1.39'):
        self.calls.append(Call(method, path, body, version, 'world'))

    def classes(self):
        seen = []
        for p in self.providers:
            for rc in p.inv:
                if rc not in seen:
                    seen.append(rc)
        return seen

    def traits(self):
        out = set(self.custom_traits) | set(STD_TRAITS) | {NUMA, SHARES}
        return sorted(out)

    def roots(self):
        return [p for p in self.providers if p.parent is None]

    def tree(self, root_uuid):
        return [p for p in self.providers if p.root == root_uuid]

    def sharing_for(self, root_uuid):
        aggs = set()
        for p in self.tree(root_uuid):
            aggs |= p.aggs
        return [p for p in self.providers
                if p.sharing and p.aggs & aggs and p.root != root_uuid]

    # -- generation --------------------------------------------------------

    def build(self):
        rng = self.rng
        # Custom resource classes and traits.
        for i in range(rng.randint(0, 2)):
            name = 'CUSTOM_RC_%s_%d' % (self.tag, i)
            self.custom_rcs.append(name)
            if rng.random() < 0.5:
                self.call('POST', '/resource_classes', {'name': name},
                          rng.choice(['1.2', '1.7', '1.39']))
            else:
                self.call('PUT', '/resource_classes/' + name, None,
                          rng.choice(['1.7', '1.39']))
        for i in range(rng.randint(0, 3)):
            name = 'CUSTOM_T_%s_%d' % (self.tag, i)
            self.custom_traits.append(name)
            self.call('PUT', '/traits/' + name, None,
                      rng.choice(['1.6', '1.39']))
        self.aggs = [self.uuid() for _ in range(rng.randint(1, 3))]

        # Trees: roots, children, grandchildren (parents set at creation).
        for r in range(rng.randint(1, 3)):
            root = self.new_provider('cn-%s-%d' % (self.tag, r), None)
            for c in range(rng.choice([0, 1, 1, 2, 2])):
                child = self.new_provider(
                    'cn-%s-%d-numa%d' % (self.tag, r, c), root)
                for g in range(rng.choice([0, 0, 1, 2])):
                    self.new_provider(
                        'cn-%s-%d-numa%d-pf%d' % (self.tag, r, c, g), child)
        for s in range(rng.choice([0, 1, 1, 2])):
            self.new_provider('ss-%s-%d' % (self.tag, s), None, sharing=True)

        for p in self.providers:
            self.gen_inventory(p)
        for p in self.providers:
            self.gen_traits(p)
        for p in self.providers:
            self.gen_aggregates(p)
        if self.allocations:
            for _ in range(rng.randint(0, 5)):
                self.gen_consumer()
        return self

    def new_provider(self, name, parent, sharing=False):
        rng = self.rng
        u = self.uuid()
        if parent is None:
            p = Provider(u, name, None, u, 1, sharing)
        else:
            p = Provider(u, name, parent.uuid, parent.root, parent.depth + 1)
        body = {'name': name, 'uuid': u}
        if parent is not None:
            body['parent_provider_uuid'] = parent.uuid
            version = rng.choice(['1.14', '1.20', '1.37', '1.39'])
        else:
            version = rng.choice(['1.0', '1.14', '1.20', '1.39'])
        self.call('POST', '/resource_providers', body, version)
        self.providers.append(p)
        self.by_uuid[u] = p
        return p

    def random_inventory(self, rc):
        rng = self.rng
        scale = SCALE.get(rc, 1)
        total = rng.choice([1, 2, 3, 4, 8, 16]) * scale
        step = rng.choice([1, 1, 1, 2]) if scale == 1 else rng.choice(
            [1, scale, scale])
        reserved = rng.choice([0, 0, 0, 0, step, total])
        min_unit = rng.choice([1, 1, step, 2 * step])
        max_unit = rng.choice([total, total, max(step, total // 2), step])
        if rng.random() < 0.93:
            # Mostly coherent; now and then something Placement refuses.
            min_unit = min(min_unit, total)
            max_unit = max(min(max_unit, total), min_unit)
            if reserved >= total and rng.random() < 0.7:
                reserved = 0
        return {'total': total, 'reserved': reserved, 'min_unit': min_unit,
                'max_unit': max_unit, 'step_size': step,
                'allocation_ratio': rng.choice(RATIOS)}

    def gen_inventory(self, p):
        rng = self.rng
        if p.sharing:
            classes = rng.sample(STD_CLASSES_SHARED, rng.randint(1, 2))
        elif p.depth == 1:
            classes = [rc for rc in STD_CLASSES_ROOT if rng.random() < 0.7]
        elif p.depth == 2:
            classes = [rc for rc in ['VCPU', 'MEMORY_MB'] if rng.random() < 0.8]
        else:
            classes = rng.sample(STD_CLASSES_LEAF, rng.randint(0, 2))
        for rc in self.custom_rcs:
            if rng.random() < 0.25:
                classes.append(rc)
        if not classes:
            return
        invs = {rc: self.random_inventory(rc) for rc in classes}
        style = rng.random()
        if style < 0.7:
            version = rng.choice(['1.0', '1.26', '1.39'])
            self.call('PUT', '/resource_providers/%s/inventories' % p.uuid,
                      {'resource_provider_generation': GEN + p.uuid,
                       'inventories': invs}, version)
        elif style < 0.85:
            for rc, inv in invs.items():
                body = dict(inv, resource_class=rc,
                            resource_provider_generation=GEN + p.uuid)
                self.call('POST', '/resource_providers/%s/inventories'
                          % p.uuid, body, rng.choice(['1.0', '1.39']))
        else:
            for rc, inv in invs.items():
                body = dict(inv, resource_provider_generation=GEN + p.uuid)
                self.call('PUT', '/resource_providers/%s/inventories/%s'
                          % (p.uuid, rc), body, rng.choice(['1.0', '1.39']))
        for rc, inv in invs.items():
            if valid_inventory(inv):
                p.inv[rc] = inv

    def gen_traits(self, p):
        rng = self.rng
        traits = set()
        if p.sharing:
            if rng.random() < 0.9:
                traits.add(SHARES)
        elif p.depth == 2 and rng.random() < 0.7:
            traits.add(NUMA)
        pool = STD_TRAITS + self.custom_traits
        for t in pool:
            if rng.random() < 0.2:
                traits.add(t)
        if not traits:
            return
        self.call('PUT', '/resource_providers/%s/traits' % p.uuid,
                  {'resource_provider_generation': GEN + p.uuid,
                   'traits': sorted(traits)}, rng.choice(['1.6', '1.39']))
        p.traits = traits

    def gen_aggregates(self, p):
        rng = self.rng
        if p.sharing:
            aggs = set(rng.sample(self.aggs, rng.randint(1, len(self.aggs))))
        elif p.depth == 1 and rng.random() < 0.7:
            aggs = set(rng.sample(self.aggs, rng.randint(1, len(self.aggs))))
        elif rng.random() < 0.15:
            aggs = {rng.choice(self.aggs)}
        else:
            return
        if rng.random() < 0.3:
            self.call('PUT', '/resource_providers/%s/aggregates' % p.uuid,
                      sorted(aggs), rng.choice(['1.1', '1.18']))
        else:
            self.call('PUT', '/resource_providers/%s/aggregates' % p.uuid,
                      {'resource_provider_generation': GEN + p.uuid,
                       'aggregates': sorted(aggs)},
                      rng.choice(['1.19', '1.39']))
        p.aggs = aggs

    def random_amount(self, inv, fit=True):
        """An amount that obeys min/max/step (mostly), for a claim."""
        rng = self.rng
        step = inv['step_size']
        lo = max(inv['min_unit'], 1)
        hi = inv['max_unit']
        if not fit or rng.random() < 0.08:
            return rng.choice([hi + step, inv['total'] * 20, lo + 1, 0])
        choices = [n for n in range(lo, hi + 1) if n % step == 0][:6]
        if not choices:
            return lo
        return rng.choice(choices)

    def random_allocation(self, fit=True):
        """{rp_uuid: {rc: n}} on one tree (plus maybe a sharing provider)."""
        rng = self.rng
        roots = self.roots()
        roots = [r for r in roots if not r.sharing] or roots
        if not roots:
            return {}
        root = rng.choice(roots)
        pool = [p for p in self.tree(root.uuid) + self.sharing_for(root.uuid)
                if p.inv]
        if not pool:
            return {}
        out = {}
        for p in rng.sample(pool, rng.randint(1, min(3, len(pool)))):
            rcs = rng.sample(sorted(p.inv), rng.randint(1, len(p.inv)))
            out[p.uuid] = {rc: self.random_amount(p.inv[rc], fit)
                           for rc in rcs}
        return out

    def allocation_body(self, consumer, allocs, version, generation):
        rng = self.rng
        minor = int(version.split('.')[1])
        c = self.consumers[consumer]
        if minor < 12:
            body = {'allocations': [
                {'resource_provider': {'uuid': rp}, 'resources': res}
                for rp, res in allocs.items()]}
            if minor >= 8:
                body.update(project_id=c['project'], user_id=c['user'])
            return body
        body = {'allocations': {rp: {'resources': res}
                                for rp, res in allocs.items()},
                'project_id': c['project'], 'user_id': c['user']}
        if minor >= 28:
            body['consumer_generation'] = generation
        if minor >= 38:
            body['consumer_type'] = c['type']
        del rng
        return body

    def gen_consumer(self):
        rng = self.rng
        allocs = self.random_allocation(fit=True)
        if not allocs:
            return
        c = self.uuid()
        self.consumers[c] = {'project': rng.choice(self.projects),
                             'user': rng.choice(self.users),
                             'type': rng.choice(['INSTANCE', 'MIGRATION',
                                                 'INSTANCE']),
                             'allocs': allocs}
        version = rng.choice(['1.0', '1.8', '1.12', '1.28', '1.38', '1.39',
                              '1.39'])
        if version not in ('1.38', '1.39'):
            self.consumers[c]['type'] = None
        self.call('PUT', '/allocations/' + c,
                  self.allocation_body(c, allocs, version, None), version)


def valid_inventory(inv):
    return (inv['total'] >= 1 and inv['min_unit'] <= inv['max_unit']
            and inv['max_unit'] <= inv['total'] and
            inv['reserved'] <= inv['total'])
