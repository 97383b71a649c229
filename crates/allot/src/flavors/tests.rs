//! The flavor list's two forms, and each mapping rule against the request Nova's
//! scheduler would build for the same flavor (`nova/scheduler/utils.py`).

use super::*;

/// A flavor with these numbers and extra specs.
fn flavor(vcpus: u64, ram_mb: u64, disk_gb: u64, specs: &[(&str, &str)]) -> Flavor {
    Flavor {
        id: "f1".to_owned(),
        name: "m1.test".to_owned(),
        vcpus,
        ram_mb,
        disk_gb,
        ephemeral_gb: 0,
        swap_mb: 0,
        extra_specs: specs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

fn request(flavor: &Flavor) -> String {
    map(flavor).expect("the flavor maps").request
}

fn error(flavor: &Flavor) -> String {
    map(flavor).expect_err("the flavor is refused")
}

#[test]
fn a_plain_flavor_asks_for_its_cpus_memory_and_disk() {
    let mapped = map(&flavor(2, 4096, 40, &[])).unwrap();
    assert_eq!(mapped.name, "m1.test");
    assert_eq!(mapped.request, "resources=DISK_GB:40,MEMORY_MB:4096,VCPU:2");
    assert!(mapped.unmapped.is_empty());
}

#[test]
fn disk_is_root_and_ephemeral_and_swap_rounded_up_to_whole_gb() {
    let with = |ephemeral_gb, swap_mb| Flavor {
        ephemeral_gb,
        swap_mb,
        ..flavor(1, 512, 10, &[])
    };
    let disk = |f: &Flavor| {
        let query = request(f);
        let at = query.find("DISK_GB:").expect("a DISK_GB amount") + "DISK_GB:".len();
        query[at..]
            .split(',')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(disk(&with(0, 0)), 10);
    assert_eq!(disk(&with(0, 1)), 11);
    assert_eq!(disk(&with(0, 512)), 11);
    assert_eq!(disk(&with(0, 1024)), 11);
    assert_eq!(disk(&with(0, 1025)), 12);
    assert_eq!(disk(&with(0, 4096)), 14);
    assert_eq!(disk(&with(5, 2048)), 17);
}

#[test]
fn no_disk_at_all_leaves_disk_gb_out() {
    assert_eq!(
        request(&flavor(1, 512, 0, &[])),
        "resources=MEMORY_MB:512,VCPU:1"
    );
    let swap_only = Flavor {
        swap_mb: 100,
        ..flavor(1, 512, 0, &[])
    };
    assert_eq!(
        request(&swap_only),
        "resources=DISK_GB:1,MEMORY_MB:512,VCPU:1"
    );
}

#[test]
fn dedicated_cpus_are_pcpu_and_isolated_emulator_threads_one_more() {
    let dedicated = flavor(4, 8192, 20, &[("hw:cpu_policy", "dedicated")]);
    assert_eq!(
        request(&dedicated),
        "resources=DISK_GB:20,MEMORY_MB:8192,PCPU:4"
    );
    let isolated = flavor(
        4,
        8192,
        20,
        &[
            ("hw:cpu_policy", "dedicated"),
            ("hw:emulator_threads_policy", "isolate"),
        ],
    );
    assert_eq!(
        request(&isolated),
        "resources=DISK_GB:20,MEMORY_MB:8192,PCPU:5"
    );
    let shared_threads = flavor(
        4,
        8192,
        20,
        &[
            ("hw:cpu_policy", "dedicated"),
            ("hw:emulator_threads_policy", "share"),
        ],
    );
    assert_eq!(
        request(&shared_threads),
        "resources=DISK_GB:20,MEMORY_MB:8192,PCPU:4"
    );
    let shared = flavor(4, 8192, 20, &[("hw:cpu_policy", "shared")]);
    assert_eq!(
        request(&shared),
        "resources=DISK_GB:20,MEMORY_MB:8192,VCPU:4"
    );
}

#[test]
fn thread_policies_become_the_hyperthreading_trait() {
    let with = |policy| {
        flavor(
            2,
            1024,
            0,
            &[
                ("hw:cpu_policy", "dedicated"),
                ("hw:cpu_thread_policy", policy),
            ],
        )
    };
    assert_eq!(
        request(&with("isolate")),
        "required=!HW_CPU_HYPERTHREADING&resources=MEMORY_MB:1024,PCPU:2"
    );
    assert_eq!(
        request(&with("require")),
        "required=HW_CPU_HYPERTHREADING&resources=MEMORY_MB:1024,PCPU:2"
    );
    assert_eq!(request(&with("prefer")), "resources=MEMORY_MB:1024,PCPU:2");
    // Read, and so not unmapped, whatever they add.
    assert!(map(&with("prefer")).unwrap().unmapped.is_empty());
}

#[test]
fn a_mixed_flavor_splits_its_cpus_by_the_mask() {
    let mixed = |specs: &[(&str, &str)]| {
        let mut all = vec![("hw:cpu_policy", "mixed")];
        all.extend_from_slice(specs);
        request(&flavor(4, 1024, 0, &all))
    };
    assert_eq!(
        mixed(&[("hw:cpu_dedicated_mask", "0-1")]),
        "resources=MEMORY_MB:1024,PCPU:2,VCPU:2"
    );
    // A mask starting with ^ is what it leaves of all the CPUs.
    assert_eq!(
        mixed(&[("hw:cpu_dedicated_mask", "^0")]),
        "resources=MEMORY_MB:1024,PCPU:3,VCPU:1"
    );
    assert_eq!(
        mixed(&[
            ("hw:cpu_dedicated_mask", "1-3,^2"),
            ("hw:emulator_threads_policy", "isolate")
        ]),
        "resources=MEMORY_MB:1024,PCPU:3,VCPU:2"
    );
    // Realtime CPUs are a mixed flavor's dedicated ones when no mask says otherwise.
    assert_eq!(
        mixed(&[("hw:cpu_realtime", "yes"), ("hw:cpu_realtime_mask", "^0-1")]),
        "resources=MEMORY_MB:1024,PCPU:2,VCPU:2"
    );
}

#[test]
fn realtime_specs_are_read_only_for_a_mixed_flavor() {
    let specs = [
        ("hw:cpu_policy", "dedicated"),
        ("hw:cpu_realtime", "yes"),
        ("hw:cpu_realtime_mask", "^0"),
    ];
    let mapped = map(&flavor(4, 1024, 0, &specs)).unwrap();
    assert_eq!(mapped.request, "resources=MEMORY_MB:1024,PCPU:4");
    assert_eq!(
        mapped.unmapped,
        vec![
            ("hw:cpu_realtime".to_owned(), "yes".to_owned()),
            ("hw:cpu_realtime_mask".to_owned(), "^0".to_owned()),
        ]
    );
}

#[test]
fn resources_specs_override_the_flavor_and_zero_drops_a_class() {
    let overridden = flavor(
        2,
        2048,
        20,
        &[("resources:VCPU", "6"), ("resources:DISK_GB", "0")],
    );
    assert_eq!(request(&overridden), "resources=MEMORY_MB:2048,VCPU:6");
    // A bare metal flavor: the node's class, nothing of the flavor's numbers.
    let baremetal = flavor(
        32,
        262144,
        800,
        &[
            ("resources:CUSTOM_BAREMETAL_GOLD", "1"),
            ("resources:VCPU", "0"),
            ("resources:MEMORY_MB", "0"),
            ("resources:DISK_GB", "0"),
        ],
    );
    assert_eq!(request(&baremetal), "resources=CUSTOM_BAREMETAL_GOLD:1");
    // An explicit PCPU with no policy is dedicated CPUs, as many as the flavor's.
    let pcpu = flavor(4, 1024, 0, &[("resources:PCPU", "4")]);
    assert_eq!(request(&pcpu), "resources=MEMORY_MB:1024,PCPU:4");
}

#[test]
fn granular_groups_with_traits_and_group_policy() {
    let specs = [
        ("trait:HW_CPU_X86_AVX2", "required"),
        ("trait:CUSTOM_SLOW", "forbidden"),
        ("resources1:CUSTOM_GPU", "1"),
        ("trait1:CUSTOM_X", "required"),
        ("resources_NIC:SRIOV_NET_VF", "2"),
        ("trait_NIC:CUSTOM_PHYSNET_A", "required"),
        ("trait_NIC:CUSTOM_PHYSNET_B", "forbidden"),
        ("group_policy", "isolate"),
    ];
    let mapped = map(&flavor(2, 4096, 40, &specs)).unwrap();
    assert_eq!(
        mapped.request,
        "group_policy=isolate&required=HW_CPU_X86_AVX2,!CUSTOM_SLOW&required1=CUSTOM_X\
         &required_NIC=CUSTOM_PHYSNET_A,!CUSTOM_PHYSNET_B\
         &resources=DISK_GB:40,MEMORY_MB:4096,VCPU:2&resources1=CUSTOM_GPU:1\
         &resources_NIC=SRIOV_NET_VF:2"
    );
    assert!(mapped.unmapped.is_empty());
}

#[test]
fn a_class_in_a_granular_group_is_not_asked_for_again() {
    let specs = [
        ("resources1:VCPU", "2"),
        ("resources2:MEMORY_MB", "1024"),
        ("group_policy", "none"),
    ];
    assert_eq!(
        request(&flavor(2, 1024, 10, &specs)),
        "group_policy=none&resources=DISK_GB:10&resources1=VCPU:2&resources2=MEMORY_MB:1024"
    );
}

#[test]
fn amounts_and_traits_are_ordered_as_nova_orders_them() {
    // Nova sorts "CLASS:N" texts: CUSTOM_A1 before CUSTOM_A, as '1' < ':'.
    let specs = [
        ("resources:CUSTOM_A", "1"),
        ("resources:CUSTOM_A1", "1"),
        ("trait:CUSTOM_B", "required"),
        ("trait:CUSTOM_A", "required"),
    ];
    assert_eq!(
        request(&flavor(1, 64, 0, &specs)),
        "required=CUSTOM_A,CUSTOM_B&resources=CUSTOM_A1:1,CUSTOM_A:1,MEMORY_MB:64,VCPU:1"
    );
}

#[test]
fn other_extra_specs_are_listed_unmapped() {
    let specs = [
        ("hw:mem_page_size", "large"),
        ("aggregate_instance_extra_specs:ssd", "true"),
        ("quota:disk_read_bytes_sec", "10240000"),
        ("hw_rng:allowed", "True"),
        ("hw:cpu_policy", "dedicated"),
        ("trait:HW_CPU_X86_AVX2", "required"),
        ("resources:CUSTOM_A", "1"),
        ("pci_passthrough:alias", "a1:2"),
    ];
    let mapped = map(&flavor(2, 1024, 0, &specs)).unwrap();
    let keys: Vec<&str> = mapped.unmapped.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "aggregate_instance_extra_specs:ssd",
            "hw:mem_page_size",
            "hw_rng:allowed",
            "pci_passthrough:alias",
            "quota:disk_read_bytes_sec",
        ]
    );
    assert_eq!(mapped.unmapped[1].1, "large");
    assert_eq!(
        mapped.request,
        "required=HW_CPU_X86_AVX2&resources=CUSTOM_A:1,MEMORY_MB:1024,PCPU:2"
    );
}

#[test]
fn memory_encryption_and_persistent_memory_add_classes() {
    let sev = flavor(2, 1024, 0, &[("hw:mem_encryption", "True")]);
    assert_eq!(
        request(&sev),
        "required=HW_CPU_X86_AMD_SEV&resources=MEMORY_MB:1024,MEM_ENCRYPTION_CONTEXT:1,VCPU:2"
    );
    let es = flavor(
        2,
        1024,
        0,
        &[
            ("hw:mem_encryption", "yes"),
            ("hw:mem_encryption_model", "amd-sev-es"),
        ],
    );
    assert!(request(&es).starts_with("required=HW_CPU_X86_AMD_SEV_ES&"));
    // Not asked for: the model is not read.
    let off = flavor(
        2,
        1024,
        0,
        &[
            ("hw:mem_encryption", "false"),
            ("hw:mem_encryption_model", "amd-sev-es"),
        ],
    );
    let mapped = map(&off).unwrap();
    assert_eq!(mapped.request, "resources=MEMORY_MB:1024,VCPU:2");
    assert_eq!(
        mapped.unmapped,
        vec![(
            "hw:mem_encryption_model".to_owned(),
            "amd-sev-es".to_owned()
        )]
    );
    let pmem = flavor(2, 1024, 0, &[("hw:pmem", "6GB,6GB,small__one")]);
    assert_eq!(
        request(&pmem),
        "resources=CUSTOM_PMEM_NAMESPACE_6GB:2,CUSTOM_PMEM_NAMESPACE_SMALL_ONE:1,MEMORY_MB:1024,VCPU:2"
    );
}

#[test]
fn security_specs_add_required_traits() {
    let traits = |specs: &[(&str, &str)]| {
        let query = request(&flavor(1, 64, 0, specs));
        query
            .strip_suffix("&resources=MEMORY_MB:64,VCPU:1")
            .expect("resources last")
            .to_owned()
    };
    assert_eq!(
        traits(&[("hw:tpm_version", "2.0")]),
        "required=COMPUTE_SECURITY_TPM_2_0,COMPUTE_SECURITY_TPM_TIS"
    );
    assert_eq!(
        traits(&[("hw:tpm_version", "2.0"), ("hw:tpm_model", "tpm-crb")]),
        "required=COMPUTE_SECURITY_TPM_2_0,COMPUTE_SECURITY_TPM_CRB"
    );
    assert_eq!(
        traits(&[("os:secure_boot", "required")]),
        "required=COMPUTE_SECURITY_UEFI_SECURE_BOOT"
    );
    assert_eq!(
        traits(&[("hw:maxphysaddr_mode", "emulate")]),
        "required=COMPUTE_ADDRESS_SPACE_EMULATED"
    );
    assert_eq!(
        traits(&[("hw:pci_numa_affinity_policy", "socket")]),
        "required=COMPUTE_SOCKET_PCI_NUMA_AFFINITY"
    );
    let nothing = map(&flavor(
        1,
        64,
        0,
        &[
            ("os:secure_boot", "disabled"),
            ("hw:pci_numa_affinity_policy", "preferred"),
        ],
    ))
    .unwrap();
    assert_eq!(nothing.request, "resources=MEMORY_MB:64,VCPU:1");
    assert!(nothing.unmapped.is_empty());
}

/// Each flavor Nova refuses, with words its error must hold: the flavor and the spec.
#[test]
fn values_nova_refuses_are_errors_naming_flavor_and_spec() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("resources:VCPU", "two")],
            "resources:VCPU=two: not an integer",
        ),
        (
            &[("resources1:CUSTOM_GPU", "-1")],
            "resources1:CUSTOM_GPU=-1: a negative amount",
        ),
        (
            &[("resources:GPU", "1")],
            "\"GPU\" is neither a standard resource class",
        ),
        (
            &[("resources:CUSTOM_gpu", "1")],
            "\"CUSTOM_gpu\" is neither",
        ),
        (
            &[("trait:CUSTOM_X", "yes")],
            "trait:CUSTOM_X=yes: not one of required, forbidden",
        ),
        (
            &[("trait:NOT_A_TRAIT", "required")],
            "\"NOT_A_TRAIT\" is neither a standard trait",
        ),
        (
            &[("group_policy", "strict")],
            "group_policy=strict: not one of none, isolate",
        ),
        (
            &[("hw:cpu_policy", "pinned")],
            "hw:cpu_policy=pinned: not one of",
        ),
        (
            &[("hw:cpu_policy", "mixed")],
            "needs hw:cpu_dedicated_mask or hw:cpu_realtime_mask",
        ),
        (
            &[("hw:cpu_policy", "dedicated"), ("resources:PCPU", "2")],
            "together with hw:cpu_policy",
        ),
        (
            &[("resources:VCPU", "2"), ("resources:PCPU", "2")],
            "both resources:VCPU and resources:PCPU",
        ),
        (
            &[("resources:PCPU", "3")],
            "resources:PCPU=3: must be the flavor's vcpus (2)",
        ),
        (
            &[("hw:cpu_thread_policy", "isolate")],
            "needs hw:cpu_policy dedicated or mixed",
        ),
        (
            &[("trait:HW_CPU_HYPERTHREADING", "forbidden")],
            "a CPU thread policy",
        ),
        (
            &[("hw:emulator_threads_policy", "isolate")],
            "hw:emulator_threads_policy=isolate needs",
        ),
        (
            &[("hw:cpu_policy", "mixed"), ("hw:cpu_dedicated_mask", "0-1")],
            "must dedicate some CPUs and leave some shared",
        ),
        (
            &[("hw:cpu_policy", "mixed"), ("hw:cpu_dedicated_mask", "1-x")],
            "hw:cpu_dedicated_mask=1-x: \"x\" is not a CPU number",
        ),
        (
            &[
                ("hw:cpu_policy", "dedicated"),
                ("hw:cpu_dedicated_mask", "0"),
            ],
            "needs hw:cpu_policy=mixed",
        ),
        (
            &[("hw:cpu_policy", "mixed"), ("hw:cpu_realtime", "yes")],
            "must leave a CPU out",
        ),
        (
            &[("hw:mem_encryption", "maybe")],
            "hw:mem_encryption=maybe: not a boolean",
        ),
        (
            &[("hw:tpm_version", "1.2"), ("hw:tpm_model", "tpm-crb")],
            "only valid with hw:tpm_version=2.0",
        ),
        (&[("hw:pmem", "a,,b")], "hw:pmem=a,,b"),
        (
            &[("resources1:VCPU", "1"), ("resources2:VCPU", "1")],
            "several suffixed groups and no group_policy",
        ),
        (
            &[("trait1:CUSTOM_X", "required")],
            "group \"1\" asks for no resources",
        ),
        (
            &[
                ("trait:COMPUTE_SECURITY_UEFI_SECURE_BOOT", "forbidden"),
                ("os:secure_boot", "required"),
            ],
            "both required and forbidden",
        ),
        (
            &[("resources:VCPU", "0"), ("resources:MEMORY_MB", "0")],
            "asks Placement for nothing",
        ),
    ];
    for (specs, words) in cases {
        let message = error(&flavor(2, 1024, 0, specs));
        assert!(message.starts_with("flavor \"m1.test\": "), "{message}");
        assert!(
            message.contains(words),
            "{specs:?}: {message:?} lacks {words:?}"
        );
    }
}

#[test]
fn suffixes_outside_nova_s_numbered_pattern_escape_its_cpu_checks() {
    // `_get_vcpu_pcpu_resources` counts `resources([1-9][0-9]*)?:` only, so this
    // named group's PCPU is not checked against the policy, and the policy's PCPU is
    // added beside it.
    let specs = [("hw:cpu_policy", "dedicated"), ("resources_A:PCPU", "1")];
    assert_eq!(
        request(&flavor(2, 1024, 0, &specs)),
        "resources=MEMORY_MB:1024,PCPU:2&resources_A=PCPU:1"
    );
}

#[test]
fn cpu_masks_are_read_as_nova_reads_them() {
    let set = |spec| {
        parse_cpu_spec(spec)
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>()
    };
    assert_eq!(set("1-4,^3,6"), [1, 2, 4, 6]);
    assert_eq!(set(" 0 , 2-3 ,,"), [0, 2, 3]);
    assert_eq!(set("0-7,^2-5"), [0, 1, 6, 7]);
    assert!(parse_cpu_spec("3-1").unwrap_err().contains("invalid range"));
    assert!(parse_cpu_spec("0-100000").unwrap_err().contains("beyond"));
    // A flavor's own count of CPUs is bounded as a mask is, once it has a mask.
    let huge = flavor(
        1 << 40,
        1024,
        0,
        &[("hw:cpu_policy", "mixed"), ("hw:cpu_dedicated_mask", "0")],
    );
    assert!(error(&huge).contains("beyond 65535"), "{}", error(&huge));
    let huge_unmasked = flavor(1 << 40, 1024, 0, &[("hw:cpu_policy", "dedicated")]);
    assert_eq!(
        request(&huge_unmasked),
        format!("resources=MEMORY_MB:1024,PCPU:{}", 1u64 << 40)
    );
}

#[test]
fn a_query_is_percent_encoded_outside_its_own_characters() {
    assert_eq!(encode("CUSTOM_A:1,!B"), "CUSTOM_A:1,!B");
    assert_eq!(encode("a b/c&d=é"), "a%20b%2Fc%26d%3D%C3%A9");
}

/// `openstack flavor list --long -f json` from python-openstackclient since 5.5
/// (Properties an object) and before (Properties a text, Swap "" for none).
#[test]
fn both_forms_of_the_flavor_list_read_alike() {
    let recent = r#"[
      {"ID": "1", "Name": "m1.tiny", "RAM": 512, "Disk": 1, "Ephemeral": 0, "VCPUs": 1,
       "Is Public": true, "Swap": 0, "RXTX Factor": 1.0, "Properties": {}},
      {"ID": "7", "Name": "pinned", "RAM": 4096, "Disk": 40, "Ephemeral": 10, "VCPUs": 4,
       "Is Public": false, "Swap": 1025, "RXTX Factor": 1.0,
       "Properties": {"hw:cpu_policy": "dedicated", "trait:HW_CPU_X86_AVX2": "required"}}
    ]"#;
    let older = r#"[
      {"ID": "1", "Name": "m1.tiny", "RAM": 512, "Disk": 1, "Ephemeral": 0, "VCPUs": 1,
       "Is Public": true, "Swap": "", "RXTX Factor": 1.0, "Properties": ""},
      {"ID": "7", "Name": "pinned", "RAM": 4096, "Disk": 40, "Ephemeral": 10, "VCPUs": 4,
       "Is Public": false, "Swap": 1025, "RXTX Factor": 1.0,
       "Properties": "hw:cpu_policy='dedicated', trait:HW_CPU_X86_AVX2='required'"}
    ]"#;
    let flavors = parse_flavor_list(recent).unwrap();
    assert_eq!(flavors, parse_flavor_list(older).unwrap());
    assert_eq!(flavors.len(), 2);
    let pinned = &flavors[1];
    assert_eq!((pinned.id.as_str(), pinned.name.as_str()), ("7", "pinned"));
    assert_eq!((pinned.vcpus, pinned.ram_mb, pinned.disk_gb), (4, 4096, 40));
    assert_eq!((pinned.ephemeral_gb, pinned.swap_mb), (10, 1025));
    assert_eq!(pinned.extra_specs["hw:cpu_policy"], "dedicated");
    assert_eq!(flavors[0].swap_mb, 0);
    assert!(flavors[0].extra_specs.is_empty());
    assert_eq!(
        request(pinned),
        "required=HW_CPU_X86_AVX2&resources=DISK_GB:52,MEMORY_MB:4096,PCPU:4"
    );
}

#[test]
fn the_text_form_keeps_quotes_and_commas_inside_values() {
    let specs = properties_text("a:note='it's, odd', hw:x='1,2', q=''").unwrap();
    assert_eq!(specs["a:note"], "it's, odd");
    assert_eq!(specs["hw:x"], "1,2");
    assert_eq!(specs["q"], "");
    assert_eq!(specs.len(), 3);
    assert!(properties_text("a='1'x").is_err());
    assert!(properties_text("a=1").is_err());
}

#[test]
fn bad_lists_are_errors_naming_entry_and_field() {
    let row = |fields: &str| format!(r#"[{{"ID": "1", "Name": "m1.x", {fields}}}]"#);
    let long = r#""RAM": 512, "Disk": 1, "Ephemeral": 0, "VCPUs": 1, "Swap": 0, "Properties": {}"#;
    assert!(parse_flavor_list(&row(long)).is_ok());
    let cases = [
        ("{}".to_owned(), "not a JSON array"),
        ("[1,".to_owned(), "not JSON"),
        ("[3]".to_owned(), "entry 0 is not a JSON object"),
        (
            r#"[{"ID": "1"}]"#.to_owned(),
            "entry 0: no text field \"Name\"",
        ),
        (
            row(&long.replace(", \"Swap\": 0", "")),
            "entry 0 (\"m1.x\"): no field \"Swap\"",
        ),
        (
            row(&long.replace(", \"Properties\": {}", "")),
            "no field \"Properties\"",
        ),
        (
            row(&long.replace("\"RAM\": 512", "\"RAM\": -512")),
            "field \"RAM\" is -512",
        ),
        (
            row(&long.replace("\"VCPUs\": 1", "\"VCPUs\": \"\"")),
            "field \"VCPUs\" is \"\"",
        ),
        (
            row(&long.replace("{}", r#"{"a": [1]}"#)),
            "\"a\" is [1], not a text",
        ),
        (
            row(&long.replace("{}", "\"a='1\"")),
            "closing quote is missing",
        ),
    ];
    for (text, words) in cases {
        let message = parse_flavor_list(&text).unwrap_err();
        assert!(
            message.contains(words),
            "{text}: {message:?} lacks {words:?}"
        );
    }
}
