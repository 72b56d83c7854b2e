// The process starts at a C `main` rather than std's: std's runtime set-up
// (finding the main thread's stack through /proc/self/maps, a guard page,
// signal handlers for stack overflow) is about 20 of a heartbeat's system
// calls and one open, and a mutation is meant to cost little more than a
// process start and one commit (contracts/receipt.md "One commit"). What of
// that set-up matters here is done below. `std::env::args` still works: on
// glibc std takes the arguments from `.init_array`, not from `main`.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// The allocator of this process, chosen in `main` before its first
/// allocation and never changed after, so every block is freed by the
/// allocator that gave it. mimalloc: its per-thread free lists make the
/// many small allocations of parsing an event cheap (`bundle-verify` frees
/// on the parsing worker threads, where glibc's small tcache made `free` a
/// tenth of the CPU). The C library's: for the one-event mutations
/// (`surface::registry::Effect::OneEvent`), which parse a checkpoint and a
/// line or two and end, and for which mimalloc's start-up was a tenth of
/// the system calls.
struct CommandAllocator;

static MIMALLOC: AtomicBool = AtomicBool::new(true);

/// The allocator [`MIMALLOC`] chose.
fn chosen() -> &'static dyn GlobalAlloc {
    if MIMALLOC.load(Ordering::Relaxed) {
        &mimalloc::MiMalloc
    } else {
        &System
    }
}

// SAFETY: each call goes whole to one allocator, the same one for every
// call of the process (the choice is made before the first allocation).
unsafe impl GlobalAlloc for CommandAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { chosen().alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { chosen().alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { chosen().dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { chosen().realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CommandAllocator = CommandAllocator;

/// Choose the allocator from the command line (nothing allocated yet).
fn choose_allocator(argc: libc::c_int, argv: *const *const libc::c_char) {
    let count = usize::try_from(argc).unwrap_or(0);
    // SAFETY: the C runtime passes `argc` valid NUL-terminated strings.
    let args = (1..count).map(|i| unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) }.to_bytes());
    if bluetape_flow::surface::registry::is_one_event_mutation(args) {
        MIMALLOC.store(false, Ordering::Relaxed);
        // Grow the heap 1 MiB at a time: one `brk` where 128 KiB steps
        // took ten (the pages are only used when touched).
        // SAFETY: a plain setting of the C library's allocator.
        unsafe { libc::mallopt(libc::M_TOP_PAD, 1 << 20) };
    } else {
        start_mimalloc();
        bounded_allocator();
    }
}

// mimalloc's own process start (`src/prim/prim.c`, what its constructor
// calls), and whether it is still to come. Internal to the C library but
// linked statically from the archive the pinned `libmimalloc-sys` builds;
// a version without them fails the link rather than running unstarted.
unsafe extern "C" {
    fn _mi_preloading() -> bool;
    fn _mi_auto_process_init();
}

/// Start mimalloc before its first allocation. It is built without its
/// constructor (`.cargo/config.toml`), so only the commands that choose it
/// pay its start (two file reads); where a build kept the constructor, it
/// has already run and nothing is done twice.
fn start_mimalloc() {
    // SAFETY: called once, on the only thread, before any allocation, as
    // the constructor would have been.
    unsafe {
        if _mi_preloading() {
            _mi_auto_process_init();
        }
    }
}

/// mimalloc v3 option (`mimalloc.h`, `mi_option_e`), set before the first
/// allocation: return freed pages after 25 ms, so a long command's peak RSS
/// stays near that of its live data while a command that ends sooner —
/// every mutation — returns none one by one (with no delay each free page
/// was an `madvise` call, 45 of a heartbeat's system calls). The arena is
/// committed eagerly, as mimalloc does by default where the kernel
/// overcommits: committing it on demand costs one `mprotect` per 64 KiB.
fn bounded_allocator() {
    const PURGE_DELAY: i32 = 15;
    // SAFETY: setting an option is a plain store mimalloc allows at any time.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 25) }
}

/// What std's start-up did that this program relies on: descriptors 0, 1
/// and 2 open (else the first file opened would become "stdout" and an
/// answer could be written into a state file), and SIGPIPE ignored, so a
/// closed pipe is an error the answer-lost path reports (DEVIATIONS 113)
/// rather than a silent death.
fn std_start_up() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: plain system calls on a local array and a constant path.
    unsafe {
        if libc::poll(fds.as_mut_ptr(), 3, 0) == -1 {
            // No poll (some sandboxes): ask each descriptor instead.
            for fd in &mut fds {
                if libc::fcntl(fd.fd, libc::F_GETFD) == -1 {
                    fd.revents = libc::POLLNVAL;
                }
            }
        }
        for fd in fds {
            if fd.revents & libc::POLLNVAL != 0
                && libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) != fd.fd
            {
                libc::abort();
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    choose_allocator(argc, argv);
    std_start_up();
    let status = bluetape_flow::cli::process_status();
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // Everything the command opened is closed and its answer written; the
    // allocator's exit-time purge (one `madvise` per region) would only
    // hand back memory the kernel is about to take anyway.
    // SAFETY: ends the process; nothing registered with atexit is needed.
    unsafe { libc::_exit(i32::from(status)) }
}
