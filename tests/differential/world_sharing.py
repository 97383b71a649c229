"""Larger worlds where sharing providers meet provider trees (`--worlds sharing`).

The small worlds of `world.py` keep sharing providers at the edge: roots of
their own, tied to trees through the root's aggregate. Issue 11 found that
allot and Placement disagree once sharing providers are *part of* trees, so
these worlds make that common:

- 40 to 70 providers: compute trees (root with VCPU/MEMORY_MB/DISK_GB, NUMA
  children with `HW_NUMA_ROOT`, NIC grandchildren with SR-IOV VFs and
  bandwidth, a device child with `CUSTOM_FPGA_X`/`PCI_DEVICE`/`VGPU`);
- several sharing pools (`DISK_GB`, `IPV4_ADDRESS`, now and then
  `MEMORY_MB`, `VCPU`, `CUSTOM_FPGA_X` or bandwidth) in one to three of
  several aggregates; some are roots with children of their own, some are
  created under a compute root or another pool, some are re-parented later
  (1.37), some have a child re-parented under them;
- trees joined to pools through a child's aggregate (a NUMA or NIC child's)
  rather than the root's;
- after the first consumers, "time passes": re-parenting, inventory
  changes, aggregate changes, more consumers.

The same `World` model is kept up to date (parents, roots, inventories,
aggregates) so that queries can aim at what exists. Queries for these worlds
are `queries.sharing_candidates_query`: the shapes quoted in issue 11 with
amounts drawn from the world, and random mixes of an unsuffixed group on pool
classes with suffixed groups on tree classes.
"""

from world import GEN, NUMA, SHARES, STD_TRAITS, World, valid_inventory

FPGA = 'CUSTOM_FPGA_X'
POOL_CLASSES = ['DISK_GB', 'IPV4_ADDRESS', 'DISK_GB', 'IPV4_ADDRESS',
                'MEMORY_MB', 'VCPU', FPGA, 'NET_BW_IGR_KILOBIT_PER_SEC']


class SharingWorld(World):
    """A `World` built by `build()` below instead of the small one."""

    shape = 'sharing'

    def reroot(self, p, parent):
        """Model a 1.37 re-parenting of `p` (and its subtree) under `parent`
        (None: becomes a root)."""
        p.parent = parent.uuid if parent else None
        new_root = parent.root if parent else p.uuid
        stack = [p]
        depth = parent.depth + 1 if parent else 1
        p.depth = depth
        while stack:
            cur = stack.pop()
            cur.root = new_root
            for c in self.providers:
                if c.parent == cur.uuid:
                    c.depth = cur.depth + 1
                    stack.append(c)

    def descendants(self, p):
        out, stack = set(), [p.uuid]
        while stack:
            u = stack.pop()
            for c in self.providers:
                if c.parent == u and c.uuid not in out:
                    out.add(c.uuid)
                    stack.append(c.uuid)
        return out

    def put_inventory(self, p, invs):
        self.call('PUT', '/resource_providers/%s/inventories' % p.uuid,
                  {'resource_provider_generation': GEN + p.uuid,
                   'inventories': invs}, self.rng.choice(['1.26', '1.39']))
        p.inv = {rc: i for rc, i in invs.items() if valid_inventory(i)}

    def put_traits(self, p, traits):
        self.call('PUT', '/resource_providers/%s/traits' % p.uuid,
                  {'resource_provider_generation': GEN + p.uuid,
                   'traits': sorted(traits)}, '1.39')
        p.traits = set(traits)

    def put_aggs(self, p, aggs):
        self.call('PUT', '/resource_providers/%s/aggregates' % p.uuid,
                  {'resource_provider_generation': GEN + p.uuid,
                   'aggregates': sorted(aggs)}, '1.39')
        p.aggs = set(aggs)

    def reparent(self, p, parent):
        body = {'name': p.name,
                'parent_provider_uuid': parent.uuid if parent else None}
        self.call('PUT', '/resource_providers/' + p.uuid, body, '1.37')
        self.reroot(p, parent)

    def build(self):
        rng = self.rng
        self.call('PUT', '/resource_classes/' + FPGA, None, '1.7')
        self.custom_rcs.append(FPGA)
        for i in range(rng.randint(0, 2)):
            name = 'CUSTOM_T_%s_%d' % (self.tag, i)
            self.custom_traits.append(name)
            self.call('PUT', '/traits/' + name, None, '1.6')
        self.aggs = [self.uuid() for _ in range(rng.randint(3, 6))]
        target = rng.randint(40, 70)

        computes, numas, nics = [], [], []
        pools = []
        n_pools = rng.randint(3, 7)
        r = 0
        while len(self.providers) < target - n_pools * 2:
            root = self.new_provider('cn-%s-%d' % (self.tag, r), None)
            computes.append(root)
            for c in range(rng.choice([0, 1, 2, 2])):
                numa = self.new_provider(
                    'cn-%s-%d-numa%d' % (self.tag, r, c), root)
                numas.append(numa)
                for g in range(rng.choice([0, 1, 1, 2])):
                    nics.append(self.new_provider(
                        'cn-%s-%d-numa%d-nic%d' % (self.tag, r, c, g), numa))
            if rng.random() < 0.4:
                numas.append(self.new_provider(
                    'cn-%s-%d-dev' % (self.tag, r), root))
            r += 1
        # Sharing pools: roots, roots with children, children of a compute
        # root or of another pool (parent given at creation).
        for s in range(n_pools):
            kind = rng.random()
            parent = None
            if kind < 0.25 and computes:
                parent = rng.choice(computes)
            elif kind < 0.35 and pools:
                parent = rng.choice(pools)
            pool = self.new_provider('ss-%s-%d' % (self.tag, s), parent)
            pool.sharing = True
            pools.append(pool)
            if rng.random() < 0.35:
                child = self.new_provider('ss-%s-%d-c' % (self.tag, s), pool)
                numas.append(child)

        for p in self.providers:
            self.gen_sharing_inventory(p, p in nics)
        for p in self.providers:
            traits = set()
            if p.sharing and rng.random() < 0.95:
                traits.add(SHARES)
            if p in numas and p.depth == 2 and not p.sharing and (
                    rng.random() < 0.7):
                traits.add(NUMA)
            for t in STD_TRAITS + self.custom_traits:
                if rng.random() < 0.12:
                    traits.add(t)
            if traits:
                self.put_traits(p, traits)
        # Aggregates: pools in 1..3; trees through the root, or only through
        # a child (NUMA, NIC, device), or both; some trees in none.
        for p in pools:
            self.put_aggs(p, rng.sample(self.aggs, rng.randint(1, 3)))
        for root in computes:
            tree = self.tree(root.uuid)
            how = rng.random()
            if how < 0.4:
                self.put_aggs(root, rng.sample(self.aggs, rng.randint(1, 2)))
            elif how < 0.75 and len(tree) > 1:
                child = rng.choice(tree[1:])
                self.put_aggs(child, [rng.choice(self.aggs)])
            elif how < 0.9:
                self.put_aggs(root, [rng.choice(self.aggs)])
                if len(tree) > 1:
                    self.put_aggs(rng.choice(tree[1:]),
                                  [rng.choice(self.aggs)])
        if self.allocations:
            for _ in range(rng.randint(2, 8)):
                self.gen_consumer()

        # Time passes: re-parenting (1.37), inventory and aggregate changes.
        for _ in range(rng.randint(1, 4)):
            self.gen_move(computes, pools)
        for _ in range(rng.randint(1, 4)):
            p = rng.choice([p for p in self.providers if p.inv]
                           or self.providers)
            invs = {rc: dict(inv) for rc, inv in p.inv.items()}
            for inv in invs.values():
                inv['total'] = max(inv['total'], inv['total'] * rng.choice(
                    [1, 2, 3]) // 2)
                inv['max_unit'] = max(min(inv['max_unit'], inv['total']),
                                      inv['min_unit'])
            if rng.random() < 0.3:
                rc = rng.choice(POOL_CLASSES)
                if rc not in invs:
                    invs[rc] = self.random_inventory(rc)
            self.put_inventory(p, invs)
        for _ in range(rng.randint(0, 2)):
            p = rng.choice(self.providers)
            self.put_aggs(p, rng.sample(self.aggs, rng.randint(0, 2)))
        if self.allocations:
            for _ in range(rng.randint(0, 4)):
                self.gen_consumer()
        return self

    def gen_move(self, computes, pools):
        """One re-parenting: a pool under a compute root or another pool, a
        provider under a pool, or a pool child back to a root."""
        rng = self.rng
        r = rng.random()
        if r < 0.4 and pools and computes:
            p, parent = rng.choice(pools), rng.choice(computes)
        elif r < 0.7 and pools:
            parent = rng.choice(pools)
            p = rng.choice([q for q in self.providers if q is not parent])
        elif r < 0.85 and len(pools) > 1:
            p, parent = rng.sample(pools, 2)
        else:
            p = rng.choice([q for q in self.providers if q.parent]
                           or self.providers)
            parent = None
        if parent is not None and (parent.uuid == p.uuid or parent.uuid
                                   in self.descendants(p)):
            return  # a loop: Placement refuses it, nothing to learn
        self.reparent(p, parent)

    def gen_sharing_inventory(self, p, nic):
        rng = self.rng
        if p.sharing:
            classes = rng.sample(POOL_CLASSES, rng.randint(1, 2))
        elif p.depth == 1:
            classes = [rc for rc in ['VCPU', 'MEMORY_MB', 'DISK_GB']
                       if rng.random() < 0.6]
        elif nic:
            classes = rng.sample(['SRIOV_NET_VF', 'NET_BW_EGR_KILOBIT_PER_SEC',
                                  'NET_BW_IGR_KILOBIT_PER_SEC'],
                                 rng.randint(1, 2))
        elif p.name.endswith('-dev') or p.name.endswith('-c'):
            classes = rng.sample([FPGA, 'PCI_DEVICE', 'VGPU', 'MEMORY_MB',
                                  'SRIOV_NET_VF'], rng.randint(1, 2))
        else:
            classes = [rc for rc in ['VCPU', 'MEMORY_MB'] if rng.random() < 0.8]
        classes = sorted(set(classes))
        if not classes:
            return
        invs = {}
        for rc in classes:
            inv = self.random_inventory(rc)
            # Pools are big, and mostly coherent: they are meant to serve.
            if p.sharing:
                inv['total'] *= 8
                inv['max_unit'] = inv['total']
                inv['reserved'] = 0
            invs[rc] = inv
        self.put_inventory(p, invs)
