//! Links `kanban` with packed relative relocations (DT_RELR, glibc 2.36 and binutils
//! 2.38 or later). The binary is position-independent, and each of its ~42,000 pointers
//! in read-only-after-start data is patched by the loader at every start; as RELA
//! entries they are a megabyte the loader reads and walks, as RELR a few kilobytes. A
//! one-shot command (`kanban show`) starts in about 1 ms less (docs/cli.md#speed).
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
