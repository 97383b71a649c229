//! Resource class metadata (issue 10): what a human needs to read a class, its units,
//! a display name and a one-line description.
//!
//! An allot extension beside the Placement API. The standard classes carry metadata
//! compiled in here ([`standard`]), fixed like the classes themselves; a custom class
//! has none until an operator sets it (`State::set_class_metadata`), and then it lives
//! in the view next to the class record and follows the class: a rename carries it
//! over, a delete removes it.

/// The longest `units` text, in characters.
pub const MAX_UNITS: usize = 32;
/// The longest `display_name` text, in characters.
pub const MAX_DISPLAY_NAME: usize = 255;
/// The longest `description` text, in characters.
pub const MAX_DESCRIPTION: usize = 1024;

/// A class's metadata. Every field may be unset: a custom class that was never given
/// metadata has all three unset, and an operator may set only some.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClassMetadata {
    /// What one unit of the class is: `count`, `MiB`, `GiB`, `kbit/s`, ...
    pub units: Option<String>,
    /// A name for people (`"Memory"` for `MEMORY_MB`).
    pub display_name: Option<String>,
    /// One line on what the class counts.
    pub description: Option<String>,
}

impl ClassMetadata {
    /// Whether no field is set (such metadata is not stored: it is the same as none).
    pub fn is_empty(&self) -> bool {
        self.units.is_none() && self.display_name.is_none() && self.description.is_none()
    }
}

/// The compiled-in metadata of the standard classes: (class, units, display name,
/// description), one row per entry of [`crate::standard::RESOURCE_CLASSES`] (a test checks that none
/// is missing, so a new release's class cannot ship without it).
#[rustfmt::skip]
const STANDARD: &[(&str, &str, &str, &str)] = &[
    ("VCPU",                                   "count",  "vCPUs",                      "Virtual CPUs, shared among instances"),
    ("MEMORY_MB",                              "MiB",    "Memory",                     "Memory, in mebibytes"),
    ("DISK_GB",                                "GiB",    "Disk",                       "Local disk space, in gibibytes"),
    ("PCI_DEVICE",                             "count",  "PCI devices",                "PCI devices passed through to instances"),
    ("SRIOV_NET_VF",                           "count",  "SR-IOV virtual functions",   "SR-IOV virtual functions of network interfaces"),
    ("NUMA_SOCKET",                            "count",  "NUMA sockets",               "NUMA sockets"),
    ("NUMA_CORE",                              "count",  "NUMA cores",                 "Cores of NUMA sockets"),
    ("NUMA_THREAD",                            "count",  "NUMA threads",               "Hardware threads of NUMA cores"),
    ("NUMA_MEMORY_MB",                         "MiB",    "NUMA memory",                "Memory of a NUMA node, in mebibytes"),
    ("IPV4_ADDRESS",                           "count",  "IPv4 addresses",             "IPv4 addresses"),
    ("VGPU",                                   "count",  "vGPUs",                      "Virtual GPUs"),
    ("VGPU_DISPLAY_HEAD",                      "count",  "vGPU display heads",         "Display heads of virtual GPUs"),
    ("NET_BW_EGR_KILOBIT_PER_SEC",             "kbit/s", "Egress bandwidth",           "Outgoing network bandwidth, in kilobits per second"),
    ("NET_BW_IGR_KILOBIT_PER_SEC",             "kbit/s", "Ingress bandwidth",          "Incoming network bandwidth, in kilobits per second"),
    ("PCPU",                                   "count",  "Dedicated CPUs",             "Physical CPUs dedicated to one instance each"),
    ("MEM_ENCRYPTION_CONTEXT",                 "count",  "Memory encryption contexts", "Contexts for guests with encrypted memory (such as AMD SEV)"),
    ("FPGA",                                   "count",  "FPGAs",                      "Field-programmable gate arrays"),
    ("PGPU",                                   "count",  "Physical GPUs",              "Physical GPUs passed through to instances"),
    ("NET_PACKET_RATE_KILOPACKET_PER_SEC",     "kpkt/s", "Packet rate",                "Network packet processing rate in both directions, in thousands of packets per second"),
    ("NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC", "kpkt/s", "Egress packet rate",         "Outgoing network packet rate, in thousands of packets per second"),
    ("NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC", "kpkt/s", "Ingress packet rate",        "Incoming network packet rate, in thousands of packets per second"),
];

/// The compiled-in metadata of a standard class, or `None` for any other name.
pub fn standard(name: &str) -> Option<ClassMetadata> {
    STANDARD
        .iter()
        .find(|(class, ..)| *class == name)
        .map(|(_, units, display, description)| ClassMetadata {
            units: Some((*units).to_owned()),
            display_name: Some((*display).to_owned()),
            description: Some((*description).to_owned()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standard::RESOURCE_CLASSES;

    #[test]
    fn every_standard_class_has_metadata_within_the_limits() {
        for class in RESOURCE_CLASSES {
            let m = standard(class).unwrap_or_else(|| panic!("{class} has no metadata"));
            assert!(m.units.as_ref().unwrap().chars().count() <= MAX_UNITS);
            assert!(m.display_name.as_ref().unwrap().chars().count() <= MAX_DISPLAY_NAME);
            assert!(m.description.as_ref().unwrap().chars().count() <= MAX_DESCRIPTION);
        }
        // And no row names a class that is not standard (a typo would hide one).
        for (class, ..) in STANDARD {
            assert!(
                RESOURCE_CLASSES.contains(class),
                "{class} is not a standard class"
            );
        }
        assert_eq!(STANDARD.len(), RESOURCE_CLASSES.len());
    }

    #[test]
    fn standard_units_are_the_expected_ones() {
        let units = |c: &str| standard(c).unwrap().units.unwrap();
        assert_eq!(units("VCPU"), "count");
        assert_eq!(units("MEMORY_MB"), "MiB");
        assert_eq!(units("DISK_GB"), "GiB");
        assert_eq!(units("NET_BW_EGR_KILOBIT_PER_SEC"), "kbit/s");
        assert_eq!(units("VGPU"), "count");
        assert!(standard("CUSTOM_X").is_none());
    }
}
