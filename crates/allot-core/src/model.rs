//! The records of the domain: providers, their inventories, custom classes and traits.

use std::num::NonZeroU64;

use uuid::Uuid;

use crate::compact::{VecMap, VecSet};
use crate::names::{ResourceClass, Text, TraitName};

/// Seconds since the Unix epoch, UTC. The domain never reads a clock: callers pass the
/// time of a write in, which keeps tests deterministic.
pub type Timestamp = i64;

/// A provider's internal id: stable for the provider's life, never reused, never shown
/// to clients (they see the uuid). Ids start at 1: the default, 0, is no provider.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct ProviderId(pub u64);

/// One resource class's inventory on one provider.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Inventory {
    /// How much exists.
    pub total: u64,
    /// How much is set aside and never allocated.
    pub reserved: u64,
    /// The smallest amount one allocation may take.
    pub min_unit: u64,
    /// The largest amount one allocation may take.
    pub max_unit: u64,
    /// Allocations must be multiples of this. Never 0: every way an inventory comes
    /// in (a request body, a store's rows, a dump) refuses 0 before one is built.
    pub step_size: NonZeroU64,
    /// Overcommit factor: capacity is `(total - reserved) * allocation_ratio`.
    pub allocation_ratio: f64,
}

impl Inventory {
    /// Placement's defaults for the optional fields, for a given total.
    pub fn with_total(total: u64) -> Self {
        Inventory {
            total,
            reserved: 0,
            min_unit: 1,
            max_unit: i32::MAX as u64,
            step_size: NonZeroU64::MIN,
            allocation_ratio: 1.0,
        }
    }

    /// The limits the inventory puts on one allocation.
    #[inline]
    pub fn units(&self) -> Units {
        Units {
            min_unit: self.min_unit,
            max_unit: self.max_unit,
            step_size: self.step_size,
        }
    }

    /// Whether one allocation of `amount` respects `min_unit`, `max_unit` and
    /// `step_size` (what is already used is [`Self::fits`]'s question).
    #[inline]
    pub fn admits(&self, amount: u64) -> Result<(), Misfit> {
        self.units().admits(amount)
    }

    /// `(total - reserved) * allocation_ratio` computed the way Placement computes it:
    /// the difference is exact (Python integers), then converted to the nearest float
    /// and multiplied by the ratio once. Subtracting two floats instead would round
    /// differently for totals above 2^53. Every capacity in the crate starts here.
    fn float_capacity(&self) -> f64 {
        let usable = i128::from(self.total) - i128::from(self.reserved);
        usable as f64 * self.allocation_ratio
    }

    /// How much may be used in all: the largest whole amount `n` with
    /// `n <= (total - reserved) * allocation_ratio`, which is what every capacity
    /// check asks. Placement compares `used + amount` with the float capacity (in SQL
    /// for candidates and listings, in Python for writes); for an integer left-hand
    /// side that is the same as comparing with the float's floor, for any sign.
    ///
    /// The floor, not Python's `int()`: they differ only when the capacity is
    /// negative and fractional (`reserved > total` or a negative ratio, which
    /// validation lets through from 1.26 as long as `int()` of it is 0), and there
    /// nothing must fit, not even an amount of 0 on an empty inventory.
    ///
    /// `i128` so that nothing wraps: the exact floor of any float capacity up to
    /// `u64::MAX` (the float of `2^63 - 1` is `2^63`, past `i64`) and down to
    /// `-u64::MAX` fits, and a larger one (a ratio up to 3.4e38) saturates at
    /// `i128::MAX`, above any sum of `u64` amounts, so it still fits everything.
    pub fn capacity(&self) -> i128 {
        // `as` from a float saturates (and maps NaN, which no request can carry, to 0).
        self.float_capacity().floor() as i128
    }

    /// The capacity as Placement reports it (provider summaries) and validates it
    /// (an inventory's capacity must be positive, or from 1.26 not negative): Python's
    /// `int()` of the float capacity, which truncates toward zero. Saturates at the
    /// bounds of `i64`, the type the summaries have always answered with.
    pub fn reported_capacity(&self) -> i64 {
        self.float_capacity().trunc() as i64
    }

    /// Whether `used` already in use plus `amount` more fits in [`Self::capacity`].
    /// Exact: the sum is taken in `i128`, where two `u64`s cannot overflow.
    pub fn fits(&self, used: u64, amount: u64) -> bool {
        i128::from(used) + i128::from(amount) <= self.capacity()
    }
}

/// The limits an inventory puts on the amount of one allocation: the one home of the
/// rule, which allocation writes, claims, listings and the candidate search all ask
/// (the search keeps a copy of these beside each provider's free room).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Units {
    /// The smallest amount one allocation may take.
    pub min_unit: u64,
    /// The largest amount one allocation may take.
    pub max_unit: u64,
    /// Allocations must be multiples of this.
    pub step_size: NonZeroU64,
}

impl Units {
    /// Whether one allocation of `amount` is allowed; if not, the first limit it
    /// breaks, in the order `min_unit`, `max_unit`, `step_size`.
    #[inline]
    pub fn admits(&self, amount: u64) -> Result<(), Misfit> {
        if amount < self.min_unit {
            Err(Misfit::BelowMinUnit)
        } else if amount > self.max_unit {
            Err(Misfit::AboveMaxUnit)
        } else if amount % self.step_size != 0 {
            Err(Misfit::OffStep)
        } else {
            Ok(())
        }
    }
}

/// Which limit of [`Units`] an amount breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misfit {
    /// Less than `min_unit`.
    BelowMinUnit,
    /// More than `max_unit`.
    AboveMaxUnit,
    /// Not a multiple of `step_size`.
    OffStep,
}

/// The persisted row of a provider, without its inventories, traits and aggregates
/// (which change on their own and are persisted by their own [`crate::Change`]s).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProviderRow {
    /// Internal id.
    pub id: ProviderId,
    /// The id clients use.
    pub uuid: Uuid,
    /// Unique human-readable name.
    pub name: String,
    /// Bumped by every change to the provider; clients pass it back to prove they saw
    /// the latest state.
    pub generation: u64,
    /// The parent provider, if nested.
    pub parent: Option<ProviderId>,
    /// The root of the provider's tree (itself when it has no parent).
    pub root: ProviderId,
    /// When the provider was created.
    pub created_at: Timestamp,
    /// When the provider last changed.
    pub updated_at: Timestamp,
}

/// A provider as the in-memory view holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    /// The persisted row.
    pub row: ProviderRow,
    /// Inventories by resource class.
    pub inventories: VecMap<ResourceClass, Inventory>,
    /// Traits.
    pub traits: VecSet<TraitName>,
    /// Aggregates the provider is a member of.
    pub aggregates: VecSet<Uuid>,
    /// Direct children (derived from the children's `parent`, never persisted).
    pub children: VecSet<ProviderId>,
    /// What allocations use here (derived from the consumers' allocations by
    /// `State::apply`, never persisted).
    pub usage: ProviderUsage,
    /// The amounts pending claims promise here (derived from the claims by
    /// `State::apply`, never persisted; see [`PendingIndex`]).
    pub pending: PendingIndex,
}

/// One amount a pending claim promises on a provider: an entry of the index the view
/// derives from the claim records, so that a capacity check reads a provider's
/// promises where it reads its usage. Totals are sums over these entries at the
/// moment asked (an entry whose claim has expired no longer counts, swept or not),
/// never counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingAmount {
    /// The claim.
    pub claim: Uuid,
    /// The claim's consumer.
    pub consumer: Uuid,
    /// Of what.
    pub class: ResourceClass,
    /// How much.
    pub amount: u64,
    /// The instant the claim stops counting ([`NEVER`] if it does not expire).
    pub expires_at: Timestamp,
}

pub use crate::pending::PendingIndex;

/// The expiry of a claim that never expires.
pub const NEVER: Timestamp = Timestamp::MAX;

impl PendingAmount {
    /// Whether the entry counts at `now`: its claim has not expired.
    pub fn live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}

/// What allocations use on one provider: an index for reads, derived from the
/// allocation records by `State::apply` and never written otherwise, so not a counter
/// that can drift: `State::check_usage_index` recomputes it from the records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderUsage {
    /// Sum of allocations per class (classes with nothing allocated are absent).
    pub by_class: VecMap<ResourceClass, u64>,
    /// Consumers holding at least one allocation here.
    pub consumers: VecSet<Uuid>,
}

impl ProviderUsage {
    /// Whether nothing is allocated here.
    pub fn is_empty(&self) -> bool {
        self.by_class.is_empty() && self.consumers.is_empty()
    }
}

impl Provider {
    /// A provider with no inventories, traits, aggregates or children.
    pub fn new(row: ProviderRow) -> Self {
        Provider {
            row,
            inventories: VecMap::new(),
            traits: VecSet::new(),
            aggregates: VecSet::new(),
            children: VecSet::new(),
            usage: ProviderUsage::default(),
            pending: PendingIndex::default(),
        }
    }

    /// The provider's internal id.
    pub fn id(&self) -> ProviderId {
        self.row.id
    }

    /// The provider's uuid.
    pub fn uuid(&self) -> Uuid {
        self.row.uuid
    }

    /// How much of `class` pending claims promise here at `now`.
    pub fn pending(&self, class: &str, now: Timestamp) -> u64 {
        self.pending.sum(class, now)
    }

    /// Whether a pending claim promises anything here at `now`.
    pub fn has_pending(&self, now: Timestamp) -> bool {
        self.pending.iter().any(|p| p.live(now))
    }

    /// How much of `class` is taken here at `now`: what allocations use plus what
    /// live pending claims promise. What every capacity decision counts.
    pub fn used(&self, class: &str, now: Timestamp) -> u64 {
        let allocated = self.usage.by_class.get(class).copied().unwrap_or(0);
        if self.pending.is_empty() {
            return allocated;
        }
        allocated.saturating_add(self.pending(class, now))
    }
}

/// A custom resource class (standard classes are compiled in and never stored).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClassRecord {
    /// The class's name (always `CUSTOM_*`).
    pub name: ResourceClass,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last renamed (created_at if never).
    pub updated_at: Timestamp,
}

/// A custom trait (standard traits are compiled in and never stored).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TraitRecord {
    /// The trait's name (always `CUSTOM_*`).
    pub name: TraitName,
    /// When it was created.
    pub created_at: Timestamp,
}

/// A consumer: whatever holds allocations (an instance, a migration, a volume).
///
/// The texts are shared ([`Text`]): many consumers carry the same project, user and
/// type, and the view interns them so that each is held once.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConsumerRow {
    /// The id clients use.
    pub uuid: Uuid,
    /// The owning project's external id.
    pub project_id: Text,
    /// The owning user's external id.
    pub user_id: Text,
    /// What kind of consumer this is (1.38), if said.
    pub consumer_type: Option<Text>,
    /// Bumped by every change to the consumer's allocations (1.28).
    pub generation: u64,
    /// When the consumer was created.
    pub created_at: Timestamp,
    /// When its allocations last changed.
    pub updated_at: Timestamp,
}

/// One amount of one resource class that a consumer holds on one provider.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Allocation {
    /// Where.
    pub provider: ProviderId,
    /// Of what.
    pub class: ResourceClass,
    /// How much.
    pub used: u64,
}

/// A consumer as the in-memory view holds it: its row and its allocations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    /// The persisted row.
    pub row: ConsumerRow,
    /// Everything the consumer holds, sorted (boxed: no spare room).
    pub allocations: Box<[Allocation]>,
}

/// Where a claim is in its life. `Expired` is stored only once the sweeper has seen
/// the claim past its expiry; before that the record says `Pending` and
/// [`Claim::state_at`] tells the truth from the time.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum ClaimState {
    /// Counts against capacity until it expires.
    Pending,
    /// Became allocations of its consumer.
    Confirmed,
    /// Released by its owner.
    Released,
    /// Expired before it was confirmed or released.
    Expired,
}

impl ClaimState {
    /// Every state, in the order of a claim's life.
    pub const ALL: [ClaimState; 4] = [
        ClaimState::Pending,
        ClaimState::Confirmed,
        ClaimState::Released,
        ClaimState::Expired,
    ];

    /// The name the API shows and the store keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Pending => "pending",
            ClaimState::Confirmed => "confirmed",
            ClaimState::Released => "released",
            ClaimState::Expired => "expired",
        }
    }

    /// The state a name stands for.
    pub fn parse(text: &str) -> Option<Self> {
        ClaimState::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl std::fmt::Display for ClaimState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state from its API name, with a refusal that lists the names (for command-line
/// parsers).
impl std::str::FromStr for ClaimState {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        ClaimState::parse(text).ok_or_else(|| {
            format!("{text:?} is no claim state (pending, confirmed, released, expired)")
        })
    }
}

/// One amount of a claim: on a provider (by uuid, which outlives the provider for a
/// claim that ended), of a class.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ClaimAmount {
    /// Where.
    pub provider: Uuid,
    /// Of what.
    pub class: ResourceClass,
    /// How much.
    pub amount: u64,
}

/// A pending claim (an allot extension): resources promised to a consumer that has
/// not started yet. While pending and not expired it counts against capacity like an
/// allocation; confirming turns it into allocations, releasing or expiring ends it.
/// Ended claims are kept for a while (so that a second release or confirm is
/// answered as the first was), then purged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claim {
    /// The claim's own id.
    pub uuid: Uuid,
    /// The consumer the resources are promised to.
    pub consumer: Uuid,
    /// The consumer's project.
    pub project_id: Text,
    /// The consumer's user.
    pub user_id: Text,
    /// The consumer's type, if given.
    pub consumer_type: Option<Text>,
    /// Free text the caller interprets.
    pub tag: Option<Text>,
    /// What is promised, sorted, one entry per provider and class.
    pub allocations: Box<[ClaimAmount]>,
    /// The recorded state (see [`ClaimState`]).
    pub state: ClaimState,
    /// When the claim was made.
    pub created_at: Timestamp,
    /// When it stops counting (None: never).
    pub expires_at: Option<Timestamp>,
    /// When it was confirmed, released or seen expired (None while pending).
    pub ended_at: Option<Timestamp>,
}

impl Claim {
    /// The claim's state at `now`: a pending claim past its expiry is expired, whether
    /// or not the sweeper has recorded it.
    pub fn state_at(&self, now: Timestamp) -> ClaimState {
        match self.state {
            ClaimState::Pending if !self.live(now) => ClaimState::Expired,
            state => state,
        }
    }

    /// Whether the claim counts against capacity at `now`.
    pub fn live(&self, now: Timestamp) -> bool {
        self.state == ClaimState::Pending && self.expires_at.is_none_or(|t| now < t)
    }

    /// When the claim ended, as of `now` (a pending claim past its expiry ended at
    /// its expiry).
    pub fn ended_at(&self, now: Timestamp) -> Option<Timestamp> {
        match self.state_at(now) {
            ClaimState::Pending => None,
            ClaimState::Expired => self.ended_at.or(self.expires_at),
            _ => self.ended_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(total, reserved, allocation_ratio, floor, int)`: Placement's values. Obtained
    /// with CPython 3 float arithmetic, the way Placement computes them:
    /// `x = (total - reserved) * allocation_ratio` (Python ints, then one float
    /// multiplication); `floor` is `math.floor(x)`, checked to be the largest integer
    /// `n` for which Python's exact int/float comparison `n <= x` holds (what the
    /// capacity checks ask); `int` is `int(x)` (what summaries show and validation
    /// checks). `None` marks a Python integer past the bounds of our return type
    /// (where ours saturates).
    #[allow(clippy::type_complexity)]
    const PLACEMENT: &[(u64, u64, f64, Option<i128>, Option<i64>)] = &[
        (10, 0, 1.0, Some(10), Some(10)),
        // Fractional ratios on odd totals.
        (7, 0, 1.5, Some(10), Some(10)),
        (7, 0, 0.1, Some(0), Some(0)),
        (30, 0, 0.1, Some(3), Some(3)),
        (3, 0, 1.1, Some(3), Some(3)),
        // 100 * 0.57 is 56.99999999999999 in floats: 56 fit, not 57.
        (100, 0, 0.57, Some(56), Some(56)),
        (1, 1, 1.0, Some(0), Some(0)),
        (3, 0, 0.0, Some(0), Some(0)),
        (5, 2, -0.0, Some(0), Some(0)),
        (1, 0, 1e-300, Some(0), Some(0)),
        (2147483647, 0, 16.0, Some(34359738352), Some(34359738352)),
        (2147483647, 2147483646, 1.5, Some(1), Some(1)),
        // Negative and fractional (reserved > total, or a negative ratio): validation
        // accepts these from 1.26 because int() is 0, yet not even 0 fits in -0.5.
        (1, 2, 0.5, Some(-1), Some(0)),
        (1, 0, -0.5, Some(-1), Some(0)),
        // Past 2^53 the difference must be taken before converting to a float.
        (
            9007199254740993,
            1,
            1.0,
            Some(9007199254740992),
            Some(9007199254740992),
        ),
        // The float of 2^63 - 1 is 2^63, past i64.
        (i64::MAX as u64, 0, 1.0, Some(1 << 63), None),
        (u64::MAX, 0, 1.0, Some(1 << 64), None),
        (0, u64::MAX, 1.0, Some(-(1 << 64)), None),
        // The largest ratio the schema allows: about 7.3e47 and 6.3e57.
        (2147483647, 0, 3.40282e38, None, None),
        (u64::MAX, 0, 3.40282e38, None, None),
    ];

    #[test]
    fn capacity_rounds_as_placement() {
        for &(total, reserved, ratio, floor, int) in PLACEMENT {
            let inv = Inventory {
                reserved,
                allocation_ratio: ratio,
                ..Inventory::with_total(total)
            };
            let case = format!("total {total}, reserved {reserved}, ratio {ratio}");
            assert_eq!(inv.capacity(), floor.unwrap_or(i128::MAX), "{case}");
            // Past i64, the reported capacity saturates toward the value's sign.
            let saturated = match floor {
                Some(f) if f < 0 => i64::MIN,
                _ => i64::MAX,
            };
            assert_eq!(inv.reported_capacity(), int.unwrap_or(saturated), "{case}");
            if let Some(floor) = floor.and_then(|f| u64::try_from(f).ok()) {
                assert!(inv.fits(floor, 0) && inv.fits(0, floor), "{case}");
                assert!(!inv.fits(floor, 1), "{case}");
            }
        }
    }

    fn units(min_unit: u64, max_unit: u64, step_size: u64) -> Inventory {
        Inventory {
            min_unit,
            max_unit,
            step_size: crate::testing::step(step_size),
            ..Inventory::with_total(u64::MAX)
        }
    }

    #[test]
    fn admits_names_the_first_limit_broken() {
        use Misfit::*;
        let cases: &[(Inventory, u64, Result<(), Misfit>)] = &[
            // Every misfit, and the bounds themselves.
            (units(4, 12, 4), 3, Err(BelowMinUnit)),
            (units(4, 12, 4), 4, Ok(())),
            (units(4, 12, 4), 12, Ok(())),
            (units(4, 12, 4), 16, Err(AboveMaxUnit)),
            (units(4, 12, 4), 6, Err(OffStep)),
            // In order: min_unit, then max_unit, then step_size.
            (units(4, 12, 4), 1, Err(BelowMinUnit)),
            (units(4, 12, 4), 13, Err(AboveMaxUnit)),
            (units(10, 2, 1), 5, Err(BelowMinUnit)),
            (units(10, 2, 1), 11, Err(AboveMaxUnit)),
            // Zero is judged like any amount.
            (units(0, 5, 3), 0, Ok(())),
            (units(1, 5, 1), 0, Err(BelowMinUnit)),
            // Step sizes at their bounds: 1 admits everything in range, u64::MAX only
            // 0 and itself.
            (units(0, u64::MAX, 1), u64::MAX, Ok(())),
            (units(0, u64::MAX, 1), u64::MAX - 1, Ok(())),
            (units(0, u64::MAX, u64::MAX), u64::MAX, Ok(())),
            (units(0, u64::MAX, u64::MAX), u64::MAX - 1, Err(OffStep)),
            (units(0, u64::MAX, u64::MAX), 1, Err(OffStep)),
            (units(0, u64::MAX, u64::MAX), 0, Ok(())),
            // Amounts at the edges of u64.
            (units(u64::MAX, u64::MAX, 1), u64::MAX, Ok(())),
            (
                units(u64::MAX, u64::MAX, 1),
                u64::MAX - 1,
                Err(BelowMinUnit),
            ),
            (units(0, u64::MAX - 1, 1), u64::MAX, Err(AboveMaxUnit)),
            (units(0, u64::MAX, 2), u64::MAX, Err(OffStep)),
            (units(0, u64::MAX, 2), u64::MAX - 1, Ok(())),
            (units(0, 0, 7), 0, Ok(())),
        ];
        for (inv, amount, expected) in cases {
            let case = format!("{:?} of {amount}", inv.units());
            assert_eq!(inv.admits(*amount), *expected, "{case}");
            assert_eq!(inv.units().admits(*amount), *expected, "{case}");
        }
    }

    #[test]
    fn nothing_fits_in_a_negative_capacity() {
        let inv = Inventory {
            reserved: 2,
            allocation_ratio: 0.5,
            ..Inventory::with_total(1)
        };
        assert!(!inv.fits(0, 0));
        let huge = Inventory {
            allocation_ratio: 3.40282e38,
            ..Inventory::with_total(1)
        };
        assert!(huge.fits(u64::MAX, u64::MAX));
    }

    /// A pending entry of `amount` of `class` for claim `n`, expiring at `expires_at`.
    fn entry(n: u128, class: &str, amount: u64, expires_at: Timestamp) -> PendingAmount {
        PendingAmount {
            claim: Uuid::from_u128(n),
            consumer: Uuid::from_u128(n),
            class: ResourceClass::new_unchecked(class),
            amount,
            expires_at,
        }
    }

    /// The sum by walking every entry: what [`PendingIndex::sum`] must equal.
    fn walked(index: &PendingIndex, class: &str, now: Timestamp) -> u64 {
        index
            .iter()
            .filter(|e| e.class.as_str() == class && e.live(now))
            .map(|e| e.amount)
            .sum()
    }

    #[test]
    fn pending_sums_equal_the_entries_through_every_change_and_expiry() {
        let mut index = PendingIndex::default();
        index.insert(entry(3, "VCPU", 2, NEVER));
        index.insert(entry(1, "VCPU", 4, 100));
        index.insert(entry(1, "DISK_GB", 40, 100));
        index.insert(entry(2, "VCPU", 1, 50));
        // Kept in (claim, class) order whatever the order of insertion.
        let order: Vec<(u128, &str)> = index
            .iter()
            .map(|e| (e.claim.as_u128(), e.class.as_str()))
            .collect();
        assert_eq!(
            order,
            [(1, "DISK_GB"), (1, "VCPU"), (2, "VCPU"), (3, "VCPU")]
        );
        let check = |index: &PendingIndex| {
            for now in [0, 49, 50, 99, 100, 1000] {
                for class in ["VCPU", "DISK_GB", "MEMORY_MB"] {
                    assert_eq!(
                        index.sum(class, now),
                        walked(index, class, now),
                        "{class} at {now}"
                    );
                }
            }
        };
        check(&index);
        assert_eq!(index.sum("VCPU", 0), 7);
        // Past the first expiry the sum leaves the expired entry out.
        assert_eq!(index.sum("VCPU", 50), 6);
        assert_eq!(index.sum("VCPU", 100), 2);
        assert!(index.remove_claim(Uuid::from_u128(2)));
        assert!(!index.remove_claim(Uuid::from_u128(2)));
        check(&index);
        assert_eq!(index.sum("VCPU", 60), 6);
        index.rename_class(
            &ResourceClass::new_unchecked("VCPU"),
            &ResourceClass::new_unchecked("CUSTOM_CORE"),
        );
        check(&index);
        assert_eq!(index.sum("VCPU", 0), 0);
        assert_eq!(index.sum("CUSTOM_CORE", 0), 6);
        // Equal indexes however they were built: the totals are derived, not kept.
        let mut other = PendingIndex::default();
        other.insert(entry(3, "CUSTOM_CORE", 2, NEVER));
        other.insert(entry(1, "DISK_GB", 40, 100));
        other.insert(entry(1, "CUSTOM_CORE", 4, 100));
        assert_eq!(index, other);
    }
}
