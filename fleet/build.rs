//! `sqlx::migrate!` embeds `migrations/` at compile time; without this, a new
//! migration file would not rebuild the crate and would be missing from it.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
