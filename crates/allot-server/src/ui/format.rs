//! How the web UI writes amounts and usage: in the class's units (its metadata,
//! `allot_core::metadata`), scaled to the largest unit that keeps a number at or
//! above one (`MEMORY_MB` counts in MiB, shown as GiB or TiB), and usage bars drawn
//! with plain CSS (a flex row of segments whose widths are the shares of the bar).
//!
//! A bar's whole is what the provider has: the capacity the allocation ratio gives
//! (`Inventory::capacity`, the rule every capacity check uses) plus the reserved
//! amount. Its segments are, in order, what allocations use, what live pending claims
//! promise, what is free, and what is reserved. The numbers the segments stand for
//! ride along as `data-` attributes, so that a test can hold the drawing to the API.

use allot_core::{Inventory, ResourceClass, State};
use maud::{html, Markup};

/// A class's units, from its metadata (`count` when it has none).
pub fn units_of(view: &State, class: &ResourceClass) -> String {
    view.class_metadata(class)
        .and_then(|m| m.units)
        .unwrap_or_else(|| "count".to_owned())
}

/// A class's name for people (its display name, else the class).
pub fn label_of(view: &State, class: &ResourceClass) -> String {
    view.class_metadata(class)
        .and_then(|m| m.display_name)
        .unwrap_or_else(|| class.as_str().to_owned())
}

/// A provider as a page names it: its name, linked to its page, for a caller the
/// API would show the provider to (`names`: `placement:resource_providers:show`,
/// [`super::Viewer::sees_providers`]); for anyone else its uuid, which is all the
/// API's own answer behind the page (a claim's, a consumer's, a headroom group's)
/// tells. `class` is the link's class (`root` on the group and drain pages).
pub fn provider_ref(view: &State, uuid: &uuid::Uuid, names: bool, class: Option<&str>) -> Markup {
    match view.provider_by_uuid(uuid).filter(|_| names) {
        Some(p) => html! { a class=[class] href={"/ui/providers/" (uuid)} { (p.row.name) } },
        None => html! { code.uuid { (uuid) } },
    }
}

/// The larger units a unit scales into, and the factor between each.
fn ladder(units: &str) -> Option<(&'static [&'static str], f64)> {
    Some(match units {
        "KiB" => (&["KiB", "MiB", "GiB", "TiB", "PiB"], 1024.0),
        "MiB" => (&["MiB", "GiB", "TiB", "PiB"], 1024.0),
        "GiB" => (&["GiB", "TiB", "PiB"], 1024.0),
        "TiB" => (&["TiB", "PiB"], 1024.0),
        "kbit/s" => (&["kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"], 1000.0),
        "Mbit/s" => (&["Mbit/s", "Gbit/s", "Tbit/s"], 1000.0),
        "kpkt/s" => (&["kpkt/s", "Mpkt/s", "Gpkt/s"], 1000.0),
        _ => return None,
    })
}

/// An amount in `units`, scaled: `262144` MiB is `256 GiB`; counts get thousands
/// separators (`12,800`).
pub fn amount(value: i128, units: &str) -> String {
    let Some((names, factor)) = ladder(units) else {
        let text = grouped(value);
        return match units {
            "count" | "" => text,
            other => format!("{text} {other}"),
        };
    };
    let mut v = value as f64;
    let mut name = names[0];
    for next in &names[1..] {
        if v.abs() < factor {
            break;
        }
        v /= factor;
        name = next;
    }
    if v.fract() == 0.0 {
        format!("{} {name}", grouped(v as i128))
    } else {
        format!("{v:.1} {name}")
    }
}

/// An integer with commas between thousands.
pub fn grouped(value: i128) -> String {
    let digits = value.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if value < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A share in percent with three decimals, for a CSS width.
fn percent(part: i128, whole: i128) -> String {
    if whole <= 0 {
        return "0%".to_owned();
    }
    format!("{:.3}%", part.clamp(0, whole) as f64 * 100.0 / whole as f64)
}

/// One class's usage on one provider (or summed over many).
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// What the allocation ratio makes of total less reserved.
    pub capacity: i128,
    /// The inventory's total.
    pub total: u64,
    /// The inventory's reserved amount.
    pub reserved: u64,
    /// What allocations use.
    pub used: u64,
    /// What live pending claims promise.
    pub pending: u64,
}

impl Usage {
    /// One provider's, for one inventory.
    pub fn of(inventory: &Inventory, used: u64, pending: u64) -> Usage {
        Usage {
            capacity: inventory.capacity().max(0),
            total: inventory.total,
            reserved: inventory.reserved,
            used,
            pending,
        }
    }

    /// Adds another provider's.
    pub fn add(&mut self, other: &Usage) {
        self.capacity += other.capacity;
        self.total += other.total;
        self.reserved += other.reserved;
        self.used += other.used;
        self.pending += other.pending;
    }

    /// What is left: capacity less used and pending (never below zero).
    pub fn free(&self) -> i128 {
        (self.capacity - self.used as i128 - self.pending as i128).max(0)
    }

    /// How full it is: used and pending over capacity (1 and more: full).
    pub fn fill(&self) -> f64 {
        if self.capacity <= 0 {
            return if self.used + self.pending > 0 {
                1.0
            } else {
                0.0
            };
        }
        (self.used + self.pending) as f64 / self.capacity as f64
    }

    /// The bar: used, pending, free and reserved as shares of capacity plus
    /// reserved.
    pub fn bar(&self, class: &str, units: &str) -> Markup {
        let whole = self.capacity + self.reserved as i128;
        let used = (self.used as i128).min(whole);
        let pending = (self.pending as i128).min(whole - used);
        let reserved = (self.reserved as i128).min(whole - used - pending);
        let free = whole - used - pending - reserved;
        let title = format!(
            "{class}: {} used, {} pending, {} free, {} reserved, of {} (after the allocation ratio)",
            amount(self.used as i128, units),
            amount(self.pending as i128, units),
            amount(self.free(), units),
            amount(self.reserved as i128, units),
            amount(self.capacity, units),
        );
        html! {
            div.bar role="img" aria-label=(title) title=(title)
                data-class=(class) data-used=(self.used) data-pending=(self.pending)
                data-reserved=(self.reserved) data-capacity=(self.capacity) {
                span.seg.used style={"width:" (percent(used, whole))} {}
                span.seg.pending style={"width:" (percent(pending, whole))} {}
                span.seg.free style={"width:" (percent(free, whole))} {}
                span.seg.reserved style={"width:" (percent(reserved, whole))} {}
            }
        }
    }
}

/// "in 9m 58s" / "expired", the text a countdown starts from (the page's script
/// keeps it going).
pub fn countdown(expires_at: i64, now: i64) -> String {
    let left = expires_at - now;
    if left <= 0 {
        return "expired".to_owned();
    }
    let (h, m, s) = (left / 3600, left % 3600 / 60, left % 60);
    if h > 0 {
        format!("in {h}h {m}m {s}s")
    } else if m > 0 {
        format!("in {m}m {s}s")
    } else {
        format!("in {s}s")
    }
}

/// "5s ago", "3m ago", "2h ago".
pub fn ago(at: i64, now: i64) -> String {
    let d = (now - at).max(0);
    if d < 60 {
        format!("{d}s ago")
    } else if d < 3600 {
        format!("{}m ago", d / 60)
    } else {
        format!("{}h ago", d / 3600)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_in_their_units() {
        assert_eq!(amount(262_144, "MiB"), "256 GiB");
        assert_eq!(amount(1536, "MiB"), "1.5 GiB");
        assert_eq!(amount(512, "MiB"), "512 MiB");
        assert_eq!(amount(2048, "GiB"), "2 TiB");
        assert_eq!(amount(12_800, "count"), "12,800");
        assert_eq!(amount(10_000_000, "kbit/s"), "10 Gbit/s");
        assert_eq!(amount(7, "widgets"), "7 widgets");
        assert_eq!(grouped(-1_234_567), "-1,234,567");
        assert_eq!(grouped(0), "0");
    }

    #[test]
    fn bars_share_the_whole() {
        let u = Usage {
            capacity: 60,
            total: 40,
            reserved: 4,
            used: 16,
            pending: 8,
        };
        let html = u.bar("VCPU", "count").into_string();
        assert!(html.contains("width:25.000%"), "{html}"); // used 16 of 64
        assert!(html.contains("width:12.500%"), "{html}"); // pending 8
        assert!(html.contains("width:56.250%"), "{html}"); // free 36
        assert!(html.contains("width:6.250%"), "{html}"); // reserved 4
        assert!(html.contains("data-used=\"16\""));
        // Over capacity: the segments still fill the bar and no more.
        let over = Usage {
            capacity: 10,
            used: 30,
            ..Usage::default()
        };
        assert!(over
            .bar("X", "count")
            .into_string()
            .contains("width:100.000%"));
        assert_eq!(over.free(), 0);
    }

    #[test]
    fn countdowns() {
        assert_eq!(countdown(100, 100), "expired");
        assert_eq!(countdown(700, 100), "in 10m 0s");
        assert_eq!(countdown(100 + 3725, 100), "in 1h 2m 5s");
        assert_eq!(ago(0, 59), "59s ago");
    }
}
