// mimalloc: its per-thread free lists make the many small allocations of
// parsing an event cheap (`bundle-verify` frees on the parsing worker
// threads, where glibc's small tcache made `free` a tenth of the CPU).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc v3 options (`mimalloc.h`, `mi_option_e`), set before the
/// command allocates much: commit arena memory only when used and return
/// freed pages at once, so peak RSS stays that of the live data (with the
/// defaults it about doubles).
fn bounded_allocator() {
    const ARENA_EAGER_COMMIT: i32 = 4;
    const PURGE_DELAY: i32 = 15;
    // SAFETY: setting an option is a plain store mimalloc allows at any time.
    unsafe {
        libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        libmimalloc_sys::mi_option_set(PURGE_DELAY, 0);
    }
}

fn main() -> std::process::ExitCode {
    bounded_allocator();
    bluetape_flow::cli::main()
}
