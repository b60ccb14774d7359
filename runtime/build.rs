fn main() {
    // Same SONAME as the official library: the dynamic linker then satisfies every NEEDED
    // `libtvm_ffi.so` (the official Python extension, its testing library) with this file.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtvm_ffi.so");
}
