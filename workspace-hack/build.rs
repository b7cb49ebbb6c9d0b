//! Empty: a build script makes cargo resolve this crate's build-dependencies, whose features
//! are the host side of the workspace's union (see Cargo.toml).
fn main() {}
