//! What only the console's tests share: a campaign file. Redis comes from the
//! workspace's test kit.

#![allow(dead_code)]

pub use seckill_testkit::Redis;

/// A campaign file in `dir`.
pub fn campaign_file(dir: &std::path::Path, id: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{id}.toml"));
    std::fs::write(
        &path,
        format!(
            "id = \"{id}\"\nname = \"{id} edition\"\ntotal = 100\npartitions = 4\n\
             per_user_limit = 1\nhold_ttl_s = 60\nprice_cents = 500\n"
        ),
    )
    .expect("campaign file");
    path
}
