// mimalloc: its per-thread free lists make the many small allocations of
// parsing an event cheap (`bundle-verify` frees on the parsing worker
// threads, where glibc's small tcache made `free` a tenth of the CPU).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc v3 options (`mimalloc.h`, `mi_option_e`), set before the
/// command allocates much: commit arena memory only when used, and return
/// freed pages after 25 ms, so peak RSS stays near that of the live data
/// (with the defaults it about doubles) while a command that ends sooner —
/// every mutation — returns none one by one: with no delay, each free page
/// was an `madvise` call (45 of a heartbeat's system calls).
fn bounded_allocator() {
    const ARENA_EAGER_COMMIT: i32 = 4;
    const PURGE_DELAY: i32 = 15;
    // SAFETY: setting an option is a plain store mimalloc allows at any time.
    unsafe {
        libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        libmimalloc_sys::mi_option_set(PURGE_DELAY, 25);
    }
}

fn main() -> std::process::ExitCode {
    bounded_allocator();
    bluetape_flow::cli::main()
}
