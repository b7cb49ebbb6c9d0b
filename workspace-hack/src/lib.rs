//! No code: this crate's dependencies carry the workspace's union of features, so a build of
//! one package compiles its dependencies exactly as the whole workspace's build did (see
//! Cargo.toml).
