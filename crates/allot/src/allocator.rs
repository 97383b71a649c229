//! The process's allocator: jemalloc, tuned so that memory freed after a burst of
//! large answers goes back to the system within about a second (issue 8; the figures
//! are in docs/design/transient-memory.md).
//!
//! glibc's malloc keeps what a thread freed in that thread's arena for good, so the
//! resident set stayed at the burst's peak; untuned jemalloc did the same for ten
//! seconds and more (its default decay, and purging only when an arena is touched
//! again). Here a background thread purges unused dirty pages on a short decay, and
//! pages are returned at once rather than kept "muzzy". Everything is set through
//! `tikv-jemalloc-ctl`'s safe `mallctl` interface: the workspace forbids `unsafe`.
//!
//! Transparent huge pages are asked for at build time instead (`opt.thp` cannot be
//! set once jemalloc runs): `.cargo/config.toml` builds jemalloc with
//! `thp:always,metadata_thp:always` as its defaults. The view is a tree of small
//! pieces spread over most of the process's memory, and at a million providers each
//! of a claim's lookups and copies missed the TLB with 4 KiB pages (issue 25; figures
//! in docs/performance.md, "Claims at scale"). `_RJEM_MALLOC_CONF` overrides it when
//! the process starts.

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long (ms) freed dirty pages may stay resident before the background thread
/// purges them: long enough that back-to-back answers reuse them, short enough that
/// the process is back at its working set a moment after a burst.
#[cfg(not(target_env = "msvc"))]
const DIRTY_DECAY_MS: isize = 1000;

/// Sets up purging; call once at start-up, before the runtime's threads exist.
/// A setting the allocator refuses is logged and skipped: it costs memory, not
/// correctness.
#[cfg(not(target_env = "msvc"))]
pub fn configure() {
    use tikv_jemalloc_ctl::{background_thread, Access, AsName};

    let mut refused: Vec<String> = Vec::new();
    // Arenas created from now on.
    for (key, value) in [
        ("arenas.dirty_decay_ms\0", DIRTY_DECAY_MS),
        ("arenas.muzzy_decay_ms\0", 0),
    ] {
        if let Err(e) = key.name().write(value) {
            refused.push(format!("{key}: {e}"));
        }
    }
    // Arenas that already exist (the main thread's at least); the others are not
    // initialised yet, and refuse, which is fine: they will be created with the
    // defaults above.
    let arenas = tikv_jemalloc_ctl::arenas::narenas::read().unwrap_or(0);
    for i in 0..arenas {
        let _ = format!("arena.{i}.dirty_decay_ms\0")
            .name()
            .write(DIRTY_DECAY_MS);
        let _ = format!("arena.{i}.muzzy_decay_ms\0").name().write(0isize);
    }
    if let Err(e) = background_thread::write(true) {
        refused.push(format!("background_thread: {e}"));
    }
    for r in refused {
        eprintln!("allot: allocator setting refused: {r}");
    }
}

/// Without jemalloc there is nothing to set.
#[cfg(target_env = "msvc")]
pub fn configure() {}

#[cfg(all(test, not(target_env = "msvc")))]
mod tests {
    use tikv_jemalloc_ctl::{Access, AsName};

    /// The build's defaults ask for huge pages (`.cargo/config.toml`), unless the
    /// environment set other options when the process started.
    #[test]
    fn jemalloc_is_built_to_ask_for_huge_pages() {
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
            return;
        }
        for option in ["opt.thp\0", "opt.metadata_thp\0"] {
            let value: &'static str = option.name().read().expect("jemalloc has the option");
            // The value comes back as the C string it is, with its NUL.
            assert_eq!(
                value.trim_end_matches('\0'),
                "always",
                "{}",
                option.trim_end_matches('\0')
            );
        }
    }
}
