//! Links the `bluetape-flow` binary as a static PIE on x86_64/aarch64 glibc
//! Linux, so a process start maps no shared objects: the dynamic loader's
//! opens, mmaps and mprotects were about 30 of a heartbeat's system calls
//! (contracts/receipt.md "One commit": a mutation costs a process start and
//! one commit).
//!
//! `-C target-feature=+crt-static` would say this directly, but cargo
//! applies RUSTFLAGS to proc-macros and build scripts too unless `--target`
//! is given, and `--target` moves the binary out of `target/release`. So the
//! binary gets the two things crt-static changes at its link: `-static-pie`,
//! and static archives for the system libraries std names. std's unwinder
//! names `gcc_s`, which has no archive; `libgcc_eh.a` is what crt-static
//! links in its place. Each archive is found through the C compiler, and
//! the directory of links comes first in the search path, so the `-lc`,
//! `-lm`, … after std's `-Bdynamic` resolve to archives as well.
//!
//! Anything missing (another libc, no archives installed, another OS) keeps
//! the ordinary dynamic link and says so as a cargo warning. The library and
//! the test binaries are linked as before.

use std::{env, fs, path::PathBuf, process::Command};

/// (name the link asks for, archive that provides it)
const ARCHIVES: [(&str, &str); 7] = [
    ("libgcc_s.a", "libgcc_eh.a"),
    ("libc.a", "libc.a"),
    ("libm.a", "libm.a"),
    ("libpthread.a", "libpthread.a"),
    ("librt.a", "librt.a"),
    ("libutil.a", "libutil.a"),
    ("libdl.a", "libdl.a"),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BLUETAPE_DYNAMIC");
    let target = env::var("TARGET").unwrap_or_default();
    let static_target = matches!(
        target.as_str(),
        "x86_64-unknown-linux-gnu" | "aarch64-unknown-linux-gnu"
    );
    if !static_target || env::var_os("BLUETAPE_DYNAMIC").is_some() {
        return;
    }
    match link_dir() {
        Ok(dir) => {
            // As a link argument of the binary only (the library and test
            // binaries stay dynamic); ld applies -L to every -l wherever it
            // stands, and the driver puts its own directories after it.
            println!("cargo:rustc-link-arg-bins=-L{}", dir.display());
            println!("cargo:rustc-link-arg-bins=-static-pie");
        }
        Err(why) => println!("cargo:warning=bluetape-flow is linked dynamically: {why}"),
    }
}

/// A directory under OUT_DIR holding a link per entry of [`ARCHIVES`].
fn link_dir() -> Result<PathBuf, String> {
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?).join("static-libs");
    fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    for (name, archive) in ARCHIVES {
        let found = Command::new(&cc)
            .arg(format!("-print-file-name={archive}"))
            .output()
            .map_err(|e| format!("{cc}: {e}"))?;
        let path = PathBuf::from(String::from_utf8_lossy(&found.stdout).trim());
        // The compiler echoes a bare name it did not find.
        if !path.is_absolute() || !path.is_file() {
            return Err(format!("no {archive} ({cc} -print-file-name)"));
        }
        let link = out.join(name);
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&path, &link).map_err(|e| e.to_string())?;
    }
    Ok(out)
}
