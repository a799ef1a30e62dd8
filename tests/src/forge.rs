//! The controller's local forge (bare repositories in a folder, state in
//! Postgres) with seeded repositories, for the controller's own tests and
//! the end-to-end ones.

use patchpilot_forge::Repo;
use patchpilot_forge_local::LocalForge;
use sqlx::PgPool;
use tempfile::TempDir;

/// Creates `repo` on `forge` with a `default_branch` whose one commit holds
/// `files` (path relative to the repository, contents).
pub async fn create_seeded_repository<T: AsRef<[u8]>>(
    forge: &LocalForge,
    repo: &Repo,
    default_branch: &str,
    files: &[(&str, T)],
) -> anyhow::Result<()> {
    let seed = tempfile::tempdir()?;
    for (path, contents) in files {
        let path = seed.path().join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, contents)?;
    }
    forge.create_repository(repo, default_branch, Some(seed.path())).await?;
    Ok(())
}

/// A local forge in a fresh folder, with one repository.
#[derive(Debug)]
pub struct SeededForge {
    /// The forge's folder; removed on drop, so it lives as long as the forge
    /// is used.
    pub root: TempDir,
    /// The forge, on the test's database.
    pub forge: LocalForge,
    /// `acme/api`, whose `main` holds the seeded files.
    pub repo: Repo,
}

/// A local forge on `pool` (a migrated database) with `acme/api` whose
/// `main` holds `files`.
pub async fn seeded_forge(pool: &PgPool, files: &[(&str, &str)]) -> anyhow::Result<SeededForge> {
    let root = tempfile::tempdir()?;
    let forge = LocalForge::new(root.path(), pool.clone());
    let repo = Repo { owner: "acme".into(), name: "api".into() };
    create_seeded_repository(&forge, &repo, "main", files).await?;
    Ok(SeededForge { root, forge, repo })
}
